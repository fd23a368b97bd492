"""A merge exported as a plain PEFT LoRA: one rank, ``lora_alpha = r`` (scaling 1), exact module names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lora_recycle.adapters import LoraExpert, lora_config_dict, save_adapter_folder


@dataclass
class ExportedLora:
    """``config`` (adapter_config.json content) and ``factors[module] = (A, B)`` with ΔW = B A."""

    config: dict[str, Any]
    factors: dict[str, tuple[torch.Tensor, torch.Tensor]]

    def state_dict(self) -> dict[str, torch.Tensor]:
        """PEFT's saved keys, ``base_model.model.<module>.lora_{A,B}.weight``."""
        out = {}
        for module, (a, b) in self.factors.items():
            out[f"base_model.model.{module}.lora_A.weight"] = a
            out[f"base_model.model.{module}.lora_B.weight"] = b
        return out

    def save_pretrained(self, path: str | Path) -> Path:
        """Write a folder ``PeftModel.from_pretrained`` (and :class:`~lora_recycle.LoraPool`) loads."""
        return save_adapter_folder(path, self.factors, self.config)

    def peft_config(self) -> Any:
        """The config as a ``peft.LoraConfig``."""
        from peft import LoraConfig

        fields = {
            k: v
            for k, v in self.config.items()
            if k not in ("peft_type", "base_model_name_or_path")
        }
        return LoraConfig(**fields)

    def to_expert(self, adapter_id: str = "merged") -> LoraExpert:
        return LoraExpert(adapter_id, dict(self.factors), 1.0, dict(self.config))


def _truncate(a: torch.Tensor, b: torch.Tensor, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Best rank-``rank`` factors of ``B A`` (SVD of the product, split as U√S, √S Vᵀ)."""
    u, s, vh = torch.linalg.svd((b @ a).double(), full_matrices=False)
    root = s[:rank].sqrt()
    return (root[:, None] * vh[:rank]).to(a.dtype), (u[:, :rank] * root).to(b.dtype)


def _pad(t: torch.Tensor, rank: int, dim: int) -> torch.Tensor:
    missing = rank - t.shape[dim]
    if missing == 0:
        return t.clone()
    shape = list(t.shape)
    shape[dim] = missing
    return torch.cat([t, t.new_zeros(shape)], dim=dim)


def export_lora(
    parts: Mapping[str, tuple[torch.Tensor, torch.Tensor]], rank: int | None = None
) -> ExportedLora:
    """``parts[module] = (A, B)`` (ΔW = B A, any ranks) -> one-rank PEFT LoRA.

    ``rank=None`` keeps every factor exactly, zero-padding to the largest rank; an int truncates each
    ΔW by SVD (exact when ``rank`` is at least ΔW's rank).
    """
    if not parts:
        raise ValueError("nothing to export: no module carries a LoRA")
    if rank is not None and (not isinstance(rank, int) or rank < 1):
        raise ValueError(f"rank must be None or an int >= 1, got {rank!r}")
    if rank is not None:
        parts = {
            m: _truncate(a, b, min(rank, *a.shape[::-1], b.shape[0])) for m, (a, b) in parts.items()
        }
    r = rank or max(a.shape[0] for a, _ in parts.values())
    factors = {m: (_pad(a, r, 0), _pad(b, r, 1)) for m, (a, b) in parts.items()}
    return ExportedLora(lora_config_dict(r, float(r), list(factors)), factors)
