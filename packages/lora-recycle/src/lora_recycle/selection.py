"""Picking K experts from a pool (spec §2.3): random, by rank, by measured score, or by closeness.

Closeness compares each candidate's ΔW_c = s B_c A_c with a target LoRA's ΔW_t per module through
the trace identities, never forming either ΔW:

    ⟨B_c A_c, B_t A_t⟩_F = Σ (A_c A_tᵀ) ⊙ (B_cᵀ B_t),      ‖B A‖²_F = Σ (A Aᵀ) ⊙ (BᵀB).

``quasi_fim`` needs ⟨ΔW_c², ΔW_t²⟩ (entrywise squares): ΔW ⊙ ΔW' = (B ∗ B')(A ∗ A') with ∗ the
row-wise Kronecker (face-splitting) product, so the same identities apply to rank r·r' factors.
``clamp`` and ``abs`` are entrywise non-linear and have no such form: they are summed over row blocks
of ΔW_c ⊙ ΔW_t built from those factors, which bounds memory by one block.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from lora_recycle.adapters import LoraExpert
from lora_recycle.pool import LoraPool

CLOSENESS = ("cosine", "clamp", "clamp_pm", "abs", "quasi_fim", "l2")
METHODS = ("random", "evaluation", "rank", *CLOSENESS)
AGGREGATES = ("micro", "macro")
_ROW_BLOCK = 256


def frobenius_inner(
    a1: torch.Tensor, b1: torch.Tensor, a2: torch.Tensor, b2: torch.Tensor
) -> torch.Tensor:
    """⟨B1 A1, B2 A2⟩_F = tr((A1 A2ᵀ)(B2ᵀ B1)) in O(r1 r2 (in + out))."""
    return ((a1 @ a2.T) * (b1.T @ b2)).sum()


def _face_split(x: torch.Tensor, y: torch.Tensor, rows_dim: int) -> torch.Tensor:
    """Row-wise Kronecker product: factors of the entrywise product of two low-rank matrices."""
    if rows_dim == 0:  # A factors (r×in): columns are entries, ranks multiply
        return (x[:, None, :] * y[None, :, :]).reshape(-1, x.shape[1])
    return (x[:, :, None] * y[:, None, :]).reshape(x.shape[0], -1)  # B factors (out×r)


def _entrywise_sum(
    a1: torch.Tensor, b1: torch.Tensor, a2: torch.Tensor, b2: torch.Tensor, kind: str
) -> torch.Tensor:
    """Σ max(ΔW1 ⊙ ΔW2, 0) or Σ |ΔW1 ⊙ ΔW2| over row blocks (no full ΔW held)."""
    a, b = _face_split(a1, a2, 0), _face_split(b1, b2, 1)
    total = torch.zeros((), dtype=a.dtype)
    for start in range(0, b.shape[0], _ROW_BLOCK):
        block = b[start : start + _ROW_BLOCK] @ a
        total = total + (block.clamp_min(0) if kind == "clamp" else block.abs()).sum()
    return total


def _module_terms(
    c: LoraExpert, t: LoraExpert, module: str, method: str
) -> tuple[float, float, float]:
    """(numerator, ‖c‖², ‖t‖²) of one module; a module on one side only has numerator 0."""

    def factors(e: LoraExpert) -> tuple[torch.Tensor, torch.Tensor] | None:
        if module not in e.factors:
            return None
        a, b = e.scaled_factors(module)
        a, b = a.double(), b.double()
        if method == "quasi_fim":  # squared entries: ΔW ⊙ ΔW
            return _face_split(a, a, 0), _face_split(b, b, 1)
        return a, b

    fc, ft = factors(c), factors(t)
    norm_c = float(frobenius_inner(*fc, *fc)) if fc else 0.0
    norm_t = float(frobenius_inner(*ft, *ft)) if ft else 0.0
    if fc is None or ft is None:
        return 0.0, norm_c, norm_t
    if method in ("clamp", "abs"):
        return float(_entrywise_sum(*fc, *ft, method)), norm_c, norm_t
    return float(frobenius_inner(*fc, *ft)), norm_c, norm_t


def closeness(
    candidate: LoraExpert, target: LoraExpert, method: str = "cosine", aggregate: str = "micro"
) -> float:
    """The closeness score of ``candidate`` to ``target`` (higher = closer).

    ``micro``: mean over the union of modules of per-module ratios; ``macro``: Σ numerators over
    sqrt(Σ‖c‖² · Σ‖t‖²). ``clamp_pm`` clamps the inner product at 0; ``quasi_fim`` takes the
    square root of the cosine of squared entries; ``l2`` is −log(1 + Σ‖ΔW_c − ΔW_t‖²).
    """
    if method not in CLOSENESS:
        raise ValueError(f"closeness method must be one of {CLOSENESS}, got {method!r}")
    if aggregate not in AGGREGATES:
        raise ValueError(f"aggregate must be one of {AGGREGATES}, got {aggregate!r}")
    modules = list(dict.fromkeys([*candidate.factors, *target.factors]))
    terms = [_module_terms(candidate, target, m, method) for m in modules]
    if method == "l2":
        return -math.log1p(sum(nc + nt - 2 * num for num, nc, nt in terms))
    if method == "clamp_pm":
        terms = [(max(num, 0.0), nc, nt) for num, nc, nt in terms]
    if aggregate == "micro":
        ratios = [num / math.sqrt(nc * nt) if nc > 0 and nt > 0 else 0.0 for num, nc, nt in terms]
        score = sum(ratios) / len(ratios)
    else:
        denom = math.sqrt(sum(nc for _, nc, _ in terms) * sum(nt for _, _, nt in terms))
        score = sum(num for num, _, _ in terms) / denom if denom > 0 else 0.0
    return math.sqrt(max(score, 0.0)) if method == "quasi_fim" else score


def selection_scores(
    pool: LoraPool,
    method: str,
    *,
    target_lora: LoraExpert | None = None,
    scores: Mapping[str, float] | None = None,
    seed: int = 0,
    aggregate: str = "micro",
) -> list[float]:
    """One score per pool expert (higher is picked first)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method == "random":
        generator = torch.Generator().manual_seed(seed)
        return torch.rand(len(pool), generator=generator, dtype=torch.float64).tolist()
    if method == "rank":
        return [float(e.rank) for e in pool]
    if method == "evaluation":
        if scores is None:
            raise ValueError(
                "method='evaluation' needs scores= (adapter id -> measured score on the target task)"
            )
        missing = [e.adapter_id for e in pool if e.adapter_id not in scores]
        if missing:
            raise ValueError(f"scores= lacks {len(missing)} pool adapters, e.g. {missing[:3]}")
        return [float(scores[e.adapter_id]) for e in pool]
    if target_lora is None:
        raise ValueError(f"method={method!r} (closeness) needs target_lora=")
    return [closeness(e, target_lora, method, aggregate) for e in pool]


def select_experts(
    pool: LoraPool,
    k: int = 30,
    method: str = "random",
    *,
    target_lora: LoraExpert | None = None,
    scores: Mapping[str, float] | None = None,
    seed: int = 0,
    aggregate: str = "micro",
    include_target: bool = True,
) -> LoraPool:
    """The top-``k`` experts of ``pool`` by ``method``, as a new pool (ties broken by pool order).

    With ``target_lora`` and ``include_target``, the target LoRA is placed first (index 0) and the
    rest are the top ``k - 1`` (a pool expert with the target's id is not picked twice).
    """
    if len(pool) == 0:
        raise ValueError("cannot select from an empty pool")
    target_id = target_lora.adapter_id if target_lora is not None and include_target else None
    with_target = target_id is not None
    candidates = [i for i, e in enumerate(pool) if e.adapter_id != target_id or target_id is None]
    wanted = k - 1 if with_target else k
    if not isinstance(k, int) or k < 1 or wanted > len(candidates):
        raise ValueError(
            f"k must be an int in [1, {len(candidates) + int(with_target)}] for this pool, got {k!r}"
        )
    all_scores = selection_scores(
        pool, method, target_lora=target_lora, scores=scores, seed=seed, aggregate=aggregate
    )
    order = sorted(candidates, key=lambda i: (-all_scores[i], i))[:wanted]
    experts = [pool[i] for i in order]
    if target_lora is not None and with_target:
        experts.insert(0, target_lora)
    return pool.with_experts(experts)
