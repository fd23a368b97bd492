"""Random-parameter controls (spec §2.3 ``reinit_case``) and π-Tuning's target re-initialisation."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from lora_recycle.adapters import LoraExpert

REINIT_CASES = ("non_target", "all")
TARGET_REINIT_STD = 0.01  # π-Tuning: the target expert's A ~ N(0, 0.01²), B = 0


def _std(tensors: Sequence[torch.Tensor]) -> float:
    return float(torch.cat([t.reshape(-1) for t in tensors]).std())


def reinit_experts(experts: Sequence[LoraExpert], case: str, seed: int = 0) -> list[LoraExpert]:
    """Experts with freshly drawn factors of the same shapes (the "random LoRAs" control).

    ``"non_target"``: every expert but the first (the target) gets A ~ N(0, std(A_target)²),
    B ~ N(0, std(B_target)²). ``"all"``: every expert gets N(0, σ²) with σ the std of all A (all B)
    entries of the pool. The scaling of each expert is kept. Inputs are not modified.
    """
    if case not in REINIT_CASES:
        raise ValueError(f"reinit must be one of {REINIT_CASES} or None, got {case!r}")
    if not experts:
        raise ValueError("reinit_experts got an empty pool")
    reference = experts[:1] if case == "non_target" else experts
    std_a = _std([a for e in reference for a, _ in e.factors.values()])
    std_b = _std([b for e in reference for _, b in e.factors.values()])
    generator = torch.Generator().manual_seed(seed)
    out = list(experts[:1]) if case == "non_target" else []
    for expert in experts[len(out) :]:
        factors = {
            module: (
                torch.randn(a.shape, generator=generator, dtype=a.dtype) * std_a,
                torch.randn(b.shape, generator=generator, dtype=b.dtype) * std_b,
            )
            for module, (a, b) in expert.factors.items()
        }
        out.append(expert.with_factors(factors))
    return out


def reinit_target(expert: LoraExpert, seed: int = 0) -> LoraExpert:
    """π-Tuning's fresh target: A ~ N(0, 0.01²), B = 0, so it starts at ΔW = 0."""
    generator = torch.Generator().manual_seed(seed)
    factors = {
        module: (
            torch.randn(a.shape, generator=generator, dtype=a.dtype) * TARGET_REINIT_STD,
            torch.zeros_like(b),
        )
        for module, (a, b) in expert.factors.items()
    }
    return expert.with_factors(factors)
