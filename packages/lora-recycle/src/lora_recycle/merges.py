"""Non-adaptive task-vector merges on ΔW_i = (√s_i B_i)(√s_i A_i) (spec §2.4): pure, dicts in and out.

Every merge works on the product ΔW, never on A and B separately, so negative weights and several
experts carry no cross terms (unlike peft's ``add_weighted_adapter`` linear/ties, peft #3004). Modules
are merged one at a time (a stream over modules), so memory holds K ΔW of one module at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import torch
from torch import nn

from lora_recycle.adapters import LoraExpert
from lora_recycle.pool import get_linear

METHODS = ("avg", "sum", "ties", "tsv", "dare_ties")
SIGN_RULES = ("total", "frequency")
TaskVector = dict[str, torch.Tensor]


def task_vectors(experts: Iterable[LoraExpert]) -> list[TaskVector]:
    """``[{module: ΔW_i}]``: each expert's ΔW with its scaling folded in once."""
    out = []
    for expert in experts:
        tv = {}
        for module in expert.factors:
            a, b = expert.scaled_factors(module)
            tv[module] = b @ a
        out.append(tv)
    return out


def ties_merge(
    deltas: torch.Tensor,
    density: float,
    majority_sign: str = "total",
    generator: torch.Generator | None = None,
    dare: bool = False,
) -> torch.Tensor:
    """TIES over ``deltas`` (K, out, in): trim to the top ``density`` by magnitude (or, with ``dare``,
    drop at random with rate ``1 - density`` and rescale by ``1/density``), elect a sign, disjoint mean."""
    k = deltas.shape[0]
    flat = deltas.reshape(k, -1)
    if dare:
        keep = torch.rand(flat.shape, generator=generator, dtype=torch.float64) < density
        trimmed = torch.where(keep.to(flat.device), flat / density, torch.zeros_like(flat))
    else:
        n_keep = max(1, round(density * flat.shape[1]))
        # exactly n_keep entries per expert (as peft's topk): a >= kth-value threshold keeps every tie
        top = flat.abs().topk(n_keep, dim=1).indices
        keep = torch.zeros_like(flat, dtype=torch.bool).scatter_(1, top, True)
        trimmed = torch.where(keep, flat, torch.zeros_like(flat))
    votes = trimmed.sum(0) if majority_sign == "total" else trimmed.sign().sum(0)
    elected = torch.where(votes >= 0, 1.0, -1.0).to(flat.dtype)
    agree = (trimmed != 0) & (trimmed.sign() == elected)
    kept = torch.where(agree, trimmed, torch.zeros_like(trimmed))
    merged = kept.sum(0) / agree.sum(0).clamp_min(1)
    return merged.reshape(deltas.shape[1:])


def tsv_merge(deltas: torch.Tensor, rank: int, ranks: Sequence[int] | None = None) -> torch.Tensor:
    """Task-Singular-Vector merge of ``deltas`` (K, out, in) keeping ``rank`` triplets per expert.

    Expert i keeps at most ``ranks[i]`` triplets (its LoRA rank, when known) and never one with
    ``s <= eps·max(out, in)·s_max`` (its numerical rank): past an expert's rank the singular vectors
    are arbitrary null-space directions, and orthogonalising them with the real ones makes the merge
    numerical noise.
    """
    eps = torch.finfo(deltas.dtype).eps if deltas.dtype.is_floating_point else 0.0
    us, ss, vs = [], [], []
    for i, delta in enumerate(deltas.double()):
        u, s, vh = torch.linalg.svd(delta, full_matrices=False)
        cap = rank if ranks is None else min(rank, ranks[i])
        numerical = int((s > eps * max(delta.shape) * s[0]).sum()) if s.numel() else 0
        r = min(cap, numerical)
        us.append(u[:, :r])
        ss.append(s[:r])
        vs.append(vh[:r])
    s_stack = torch.cat(ss)
    if s_stack.numel() == 0:
        return torch.zeros_like(deltas[0])
    u_stack, v_stack = torch.cat(us, 1), torch.cat(vs, 0)
    uu, _, uvh = torch.linalg.svd(u_stack, full_matrices=False)
    vu, _, vvh = torch.linalg.svd(v_stack.T, full_matrices=False)
    u_perp, v_perp = uu @ uvh, (vu @ vvh).T
    return ((u_perp * s_stack) @ v_perp).to(deltas.dtype)


def _check(method: str, density: float, tsv_rank: int, majority_sign: str) -> None:
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if not 0 < density <= 1:
        raise ValueError(f"density must be in (0, 1], got {density!r}")
    if not isinstance(tsv_rank, int) or tsv_rank < 1:
        raise ValueError(f"tsv_rank must be an int >= 1, got {tsv_rank!r}")
    if majority_sign not in SIGN_RULES:
        raise ValueError(f"majority_sign must be one of {SIGN_RULES}, got {majority_sign!r}")


def merge_task_vectors(
    experts: Iterable[LoraExpert] | Sequence[Mapping[str, torch.Tensor]],
    method: str = "avg",
    *,
    density: float = 0.4,
    tsv_rank: int = 8,
    majority_sign: str = "total",
    seed: int = 0,
) -> TaskVector:
    """Merge K task vectors into one ``{module: ΔW}``.

    ``experts`` is a pool (or list of :class:`LoraExpert`) or a list of ``{module: ΔW}`` dicts.
    An expert lacking a module contributes a zero ΔW there. ``avg`` divides by K, ``sum`` does not;
    ``ties`` / ``dare_ties`` use ``density`` and ``majority_sign``; ``tsv`` keeps ``tsv_rank``
    singular triplets per expert, capped at the expert's LoRA rank (its numerical rank for ΔW dicts).
    """
    _check(method, density, tsv_rank, majority_sign)
    items = list(experts)
    if not items:
        raise ValueError("merge_task_vectors got no experts")
    loras = [e for e in items if isinstance(e, LoraExpert)]
    is_lora = isinstance(items[0], LoraExpert)
    tvs = task_vectors(loras) if is_lora else [dict(t) for t in items]  # type: ignore[call-overload]
    modules = list(dict.fromkeys(m for tv in tvs for m in tv))
    generator = torch.Generator().manual_seed(seed)
    merged: TaskVector = {}
    for module in modules:
        like = next(tv[module] for tv in tvs if module in tv)
        stack = torch.stack([tv.get(module, torch.zeros_like(like)) for tv in tvs])
        if method == "avg":
            merged[module] = stack.mean(0)
        elif method == "sum":
            merged[module] = stack.sum(0)
        elif method == "tsv":
            lora_ranks = (
                [e.factors[module][0].shape[0] if module in e.factors else 0 for e in loras]
                if is_lora
                else None
            )
            merged[module] = tsv_merge(stack, tsv_rank, lora_ranks)
        else:
            merged[module] = ties_merge(
                stack, density, majority_sign, generator, dare=method == "dare_ties"
            )
    return merged


def apply_task_vector(
    model: nn.Module, task_vector: Mapping[str, torch.Tensor], scale: float = 1.0
) -> nn.Module:
    """Add ``scale · ΔW`` to each named linear weight of ``model``, in place (``W += ΔW``)."""
    with torch.no_grad():
        for module, delta in task_vector.items():
            weight = get_linear(model, module).weight
            if weight.shape != delta.shape:
                raise ValueError(
                    f"module {module!r}: weight {tuple(weight.shape)}, ΔW {tuple(delta.shape)}"
                )
            weight += scale * delta.to(weight.dtype)
    return model
