"""Arrow routing (baseline, spec §2.4): per token, the top-k experts by |⟨x, vᵢ⟩|, softmax-weighted.

``vᵢ`` is the top right singular vector of ΔWᵢ = sᵢ Bᵢ Aᵢ, found from the factors (QR of B, SVD of
the small R_B A), never from ΔW. Experts lacking a module never route there.
"""

from __future__ import annotations

import torch
from torch import nn

from lora_recycle.pool import LoraPool, get_linear, unwrap_base


def top_right_singular_vector(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The unit top right singular vector of ``B A`` (sign arbitrary; routing uses |·|)."""
    _, r_b = torch.linalg.qr(b.double())
    _, _, vh = torch.linalg.svd(r_b @ a.double(), full_matrices=False)
    return vh[0].to(a.dtype)


class ArrowLinear(nn.Module):
    lora_A: torch.Tensor
    lora_B: torch.Tensor
    prototypes: torch.Tensor
    row_owner: torch.Tensor
    row_scaling: torch.Tensor

    def __init__(
        self, base: nn.Linear, pool: LoraPool, module: str, top_k: int, temperature: float
    ) -> None:
        super().__init__()
        self.base = base
        owners = [i for i, e in enumerate(pool) if module in e.factors]
        a_parts = [pool[i].factors[module][0] for i in owners]
        b_parts = [pool[i].factors[module][1] for i in owners]
        self.register_buffer("lora_A", torch.cat(a_parts))
        self.register_buffer("lora_B", torch.cat(b_parts, dim=1))
        self.register_buffer(
            "prototypes",
            torch.stack(
                [top_right_singular_vector(a, b) for a, b in zip(a_parts, b_parts, strict=True)]
            ),
        )
        rows = [torch.full((a.shape[0],), j) for j, a in enumerate(a_parts)]
        self.register_buffer("row_owner", torch.cat(rows))
        self.register_buffer(
            "row_scaling",
            torch.cat(
                [
                    torch.full((a.shape[0],), pool[i].scaling)
                    for i, a in zip(owners, a_parts, strict=True)
                ]
            ).to(a_parts[0].dtype),
        )
        self.top_k = min(top_k, len(owners))
        self.temperature = temperature

    def gates(self, x: torch.Tensor) -> torch.Tensor:
        """(..., n_experts) routing weights: softmax over the top-k |⟨x, vᵢ⟩| / temperature, 0 elsewhere."""
        logits = (x @ self.prototypes.T).abs() / self.temperature
        top = logits.topk(self.top_k, dim=-1)
        weights = torch.softmax(top.values, dim=-1)
        return torch.zeros_like(logits).scatter(-1, top.indices, weights)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m = self.gates(x)[..., self.row_owner] * self.row_scaling
        return self.base(x) + (x @ self.lora_A.T * m) @ self.lora_B.T


def get_arrow_model(
    base_model: nn.Module, pool: LoraPool, *, top_k: int = 3, temperature: float = 1.0
) -> nn.Module:
    """Replace every pool module of ``base_model`` (in place) by an :class:`ArrowLinear`; return it."""
    if len(pool) == 0:
        raise ValueError("cannot route over an empty pool")
    if not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be an int >= 1, got {top_k!r}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    model = unwrap_base(base_model)
    for module in pool.modules:
        parent_name, _, child = module.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(
            parent,
            child,
            ArrowLinear(get_linear(model, module), pool, module, top_k, temperature),
        )
    return model
