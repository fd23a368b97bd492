"""A pool of LoRA experts loaded from PEFT adapter folders, filtered as the paper's hub was (§2.1)."""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Literal

import torch
from torch import nn

from lora_recycle.adapters import (
    LoraExpert,
    config_rejection,
    parse_state_dict,
    read_adapter_folder,
    resolve_adapter_path,
    scaling_from_config,
)
from lora_recycle.errors import (
    AdapterError,
    IncompatibleAdapterError,
    NonFiniteAdapterError,
    UnsupportedAdapterError,
)

logger = logging.getLogger(__name__)
OnIncompatible = Literal["raise", "skip"]


def unwrap_base(model: nn.Module) -> nn.Module:
    """The plain base model inside a ``PeftModel`` (or the model itself)."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def linear_shapes(model: nn.Module) -> dict[str, tuple[int, int]]:
    """``{name: (out, in)}`` for every ``nn.Linear`` of ``model``, in module order."""
    return {
        name: (module.out_features, module.in_features)
        for name, module in unwrap_base(model).named_modules()
        if isinstance(module, nn.Linear)
    }


def get_linear(model: nn.Module, name: str) -> nn.Linear:
    """The ``nn.Linear`` called ``name`` in ``model`` (a clear error when it is missing or not linear)."""
    try:
        module = model.get_submodule(name)
    except AttributeError as exc:
        raise ValueError(f"the model has no module {name!r}") from exc
    if not isinstance(module, nn.Linear):
        raise ValueError(f"module {name!r} is a {type(module).__name__}, expected nn.Linear")
    return module


def check_compatible(expert: LoraExpert, shapes: dict[str, tuple[int, int]]) -> None:
    """Raise :class:`IncompatibleAdapterError` unless every module exists with A: r×in, B: out×r."""
    for module, (a, b) in expert.factors.items():
        if module not in shapes:
            raise IncompatibleAdapterError(
                expert.adapter_id,
                module,
                None,
                (b.shape[0], a.shape[1]),
                detail=f"module {module!r} is not a linear layer of the base model",
            )
        if (b.shape[0], a.shape[1]) != shapes[module]:
            raise IncompatibleAdapterError(
                expert.adapter_id, module, shapes[module], (b.shape[0], a.shape[1])
            )


class LoraPool(Sequence[LoraExpert]):
    """An ordered list of :class:`LoraExpert` over one base model, with the filter report."""

    def __init__(
        self,
        experts: Iterable[LoraExpert],
        shapes: dict[str, tuple[int, int]],
        report: dict[str, list[str]] | None = None,
    ) -> None:
        self.experts = list(experts)
        self.shapes = dict(shapes)
        self._report = {k: list(v) for k, v in (report or {}).items()}
        for expert in self.experts:
            check_compatible(expert, self.shapes)

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def from_pretrained(
        cls,
        ids_or_dirs: Iterable[str | Path],
        base_model: nn.Module,
        *,
        on_incompatible: OnIncompatible = "raise",
        task_type: str | None = "CAUSAL_LM",
        dtype: torch.dtype = torch.float32,
    ) -> LoraPool:
        """Load PEFT adapters (folders or hub ids), applying every filter of spec §2.1.

        ``on_incompatible="raise"`` stops at the first adapter outside the filter (the error names it
        and the reason); ``"skip"`` logs it and records it under its reason in :meth:`filter_report`.
        ``task_type=None`` accepts any task type (for non-LM models such as an MLP). Duplicate ids are
        dropped with a warning. Factors are kept in ``dtype`` (fp32 by default; the paper used bf16).
        """
        if on_incompatible not in ("raise", "skip"):
            raise ValueError(f"on_incompatible must be 'raise' or 'skip', got {on_incompatible!r}")
        ids = [str(i) for i in ids_or_dirs]
        if not ids:
            raise ValueError("from_pretrained got no adapter ids or folders (an empty pool)")
        shapes = linear_shapes(base_model)
        report: dict[str, list[str]] = {}
        experts: list[LoraExpert] = []
        seen: set[str] = set()
        for adapter_id in ids:
            key = (
                str(Path(adapter_id).expanduser().resolve())
                if Path(adapter_id).expanduser().exists()
                else adapter_id
            )
            if key in seen:
                warnings.warn(
                    f"duplicate adapter {adapter_id!r} dropped from the pool", stacklevel=2
                )
                report.setdefault("duplicate", []).append(adapter_id)
                continue
            seen.add(key)
            try:
                expert = _load_one(adapter_id, shapes, task_type, dtype, report)
            except AdapterError as error:
                if on_incompatible == "raise":
                    raise
                logger.warning("skipping %s", error)
                report.setdefault(error.reason, []).append(adapter_id)
                continue
            experts.append(expert)
            report.setdefault("kept", []).append(adapter_id)
        return cls(experts, shapes, report)

    @classmethod
    def from_experts(cls, experts: Iterable[LoraExpert], base_model: nn.Module) -> LoraPool:
        """A pool of experts built in memory (checked against ``base_model``'s linear shapes and, as
        :meth:`from_pretrained` does, for NaN/Inf in the factors and the scaling)."""
        experts = list(experts)
        for expert in experts:
            _check_finite(expert)
        return cls(experts, linear_shapes(base_model))

    # -- access --------------------------------------------------------------------------------
    def filter_report(self) -> dict[str, list[str]]:
        """``{reason: [adapter ids]}``: ``kept``, ``duplicate``, ``lm_head_dropped`` and each rejection."""
        return {k: list(v) for k, v in self._report.items()}

    def __len__(self) -> int:
        return len(self.experts)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return self.subset(range(len(self))[index])
        return self.experts[index]

    def __iter__(self) -> Iterator[LoraExpert]:
        return iter(self.experts)

    @property
    def ids(self) -> list[str]:
        return [e.adapter_id for e in self.experts]

    @property
    def modules(self) -> list[str]:
        """The union of the experts' target modules, in the base model's order."""
        present = {m for e in self.experts for m in e.factors}
        return [m for m in self.shapes if m in present]

    def subset(self, indices: Iterable[int]) -> LoraPool:
        return LoraPool([self.experts[i] for i in indices], self.shapes)

    def with_experts(self, experts: Iterable[LoraExpert]) -> LoraPool:
        """A pool over the same base holding ``experts`` (checked)."""
        return LoraPool(experts, self.shapes)


def _load_one(
    adapter_id: str,
    shapes: dict[str, tuple[int, int]],
    task_type: str | None,
    dtype: torch.dtype,
    report: dict[str, list[str]],
) -> LoraExpert:
    path = resolve_adapter_path(adapter_id)
    config, state = read_adapter_folder(path)
    rejected = config_rejection(config, task_type)
    if rejected is not None:
        raise UnsupportedAdapterError(adapter_id, *rejected)
    factors, dropped = parse_state_dict(adapter_id, state, dtype)
    if dropped:
        report.setdefault("lm_head_dropped", []).append(adapter_id)
    if not factors:
        raise AdapterError(adapter_id, "empty", "no LoRA factors outside lm_head")
    ranks = {a.shape[0] for a, _ in factors.values()}
    if len(ranks) != 1:
        raise UnsupportedAdapterError(
            adapter_id, "rank_pattern", f"modules have different ranks {sorted(ranks)}"
        )
    expert = LoraExpert(adapter_id, factors, scaling_from_config(config, ranks.pop()), config)
    check_compatible(expert, shapes)
    return expert


def _check_finite(expert: LoraExpert) -> None:
    if not math.isfinite(expert.scaling):
        raise NonFiniteAdapterError(
            expert.adapter_id, "non_finite", f"scaling {expert.scaling!r} is not finite"
        )
    for module, (a, b) in expert.factors.items():
        for name, tensor in (("lora_A", a), ("lora_B", b)):
            if not torch.isfinite(tensor).all():
                raise NonFiniteAdapterError(
                    expert.adapter_id, "non_finite", f"{module}.{name} holds NaN or Inf"
                )
