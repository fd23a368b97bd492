"""LoraHub (sail-sg/lorahub): gradient-free weights for a pool, merged as A = Σ wᵢ Aᵢ, B = Σ wᵢ Bᵢ.

Combining A and B separately includes cross terms Bᵢ Aⱼ (the published method; spec §2.4) and needs
equal ranks. Each factor carries √sᵢ so BᵢAᵢ carries the scaling once. The optimiser is nevergrad's
``NGOpt`` where installed; without nevergrad a seeded random search runs, with a warning.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from lora_recycle.adapters import LoraExpert
from lora_recycle.merges import TaskVector, apply_task_vector
from lora_recycle.pool import get_linear


@dataclass
class LoraHubResult:
    weights: np.ndarray
    objective: float
    task_vector: TaskVector
    evaluations: int
    optimizer: str


def lorahub_factors(
    experts: Sequence[LoraExpert], weights: Sequence[float]
) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """``{module: (Σ wᵢ √sᵢ Aᵢ, Σ wᵢ √sᵢ Bᵢ)}``; raises when ranks differ."""
    ranks = {e.adapter_id: e.rank for e in experts}
    if len(set(ranks.values())) > 1:
        raise ValueError(f"ranks differ ({ranks}): use 'cat' or task-vector merge")
    if len(weights) != len(experts):
        raise ValueError(f"need one weight per expert ({len(experts)}), got {len(weights)}")
    modules = list(dict.fromkeys(m for e in experts for m in e.factors))
    out = {}
    for module in modules:
        a_sum: torch.Tensor | None = None
        b_sum: torch.Tensor | None = None
        for w, expert in zip(weights, experts, strict=True):
            if module not in expert.factors:
                continue
            a, b = expert.scaled_factors(module)
            a_sum = a * w if a_sum is None else a_sum + a * w
            b_sum = b * w if b_sum is None else b_sum + b * w
        assert a_sum is not None and b_sum is not None
        out[module] = (a_sum, b_sum)
    return out


def lorahub_task_vector(experts: Sequence[LoraExpert], weights: Sequence[float]) -> TaskVector:
    return {m: b @ a for m, (a, b) in lorahub_factors(experts, weights).items()}


def _grid_search_1d(
    objective: Callable[[np.ndarray], float], budget: int, bounds: tuple[float, float]
) -> np.ndarray:
    """The obvious search for one weight: 0 first (budget 1 returns the base), then a grid on the bounds."""
    points = [0.0, *np.linspace(bounds[0], bounds[1], budget - 1).tolist()] if budget > 1 else [0.0]
    values = [objective(np.array([x])) for x in points]
    return np.array([points[int(np.argmin(values))]])


def _minimise(
    objective: Callable[[np.ndarray], float],
    k: int,
    budget: int,
    bounds: tuple[float, float],
    seed: int,
) -> tuple[np.ndarray, str]:
    if k == 1:
        # NGOpt on a 1-D array fails in nevergrad 1.0.12 (metamodel float() of a (1,) array, a TypeError
        # since numpy 2.4, raised in a worker thread); one weight needs no metamodel: a grid is exact enough.
        return _grid_search_1d(objective, budget, bounds), "grid"
    try:
        import nevergrad as ng
    except ImportError:
        warnings.warn(
            "nevergrad is not installed: LoraHub runs a seeded random search (pip install 'lora-recycle[nevergrad]')",
            stacklevel=3,
        )
        rng = np.random.default_rng(seed)
        best_x, best_f = np.zeros(k), objective(np.zeros(k))
        for _ in range(budget - 1):
            x = rng.uniform(*bounds, size=k)
            f = objective(x)
            if f < best_f:
                best_x, best_f = x, f
        return best_x, "random_search"
    param = ng.p.Array(init=np.zeros(k), lower=bounds[0], upper=bounds[1])
    param.random_state = np.random.RandomState(seed)
    optimizer = ng.optimizers.NGOpt(parametrization=param, budget=budget)
    recommendation = optimizer.minimize(objective)
    return np.asarray(recommendation.value, dtype=float), "NGOpt"


def lorahub_optimize(
    base_model: nn.Module,
    experts: Sequence[LoraExpert],
    loss_fn: Callable[[nn.Module], float],
    *,
    budget: int = 100,
    bounds: tuple[float, float] = (-1.5, 1.5),
    l1: float = 0.05,
    seed: int = 42,
) -> LoraHubResult:
    """Find LoraHub weights minimising ``loss_fn(model) + l1·mean|w|`` in ``budget`` evaluations.

    ``loss_fn`` gets ``base_model`` with the candidate merge added to its weights (restored after each
    call; the model is left as it was). Returns the weights and the merged task vector.
    """
    experts = list(experts)
    if not experts:
        raise ValueError("lorahub_optimize got an empty pool")
    if not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be an int >= 1, got {budget!r}")
    if not bounds[0] < 0 < bounds[1]:
        raise ValueError(f"bounds must contain 0 strictly inside, got {bounds!r}")
    lorahub_factors(experts, [0.0] * len(experts))  # rank check before any evaluation
    modules = list(dict.fromkeys(m for e in experts for m in e.factors))
    saved = {m: get_linear(base_model, m).weight.detach().clone() for m in modules}
    evaluations = 0

    def objective(w: np.ndarray) -> float:
        nonlocal evaluations
        evaluations += 1
        apply_task_vector(base_model, lorahub_task_vector(experts, w.tolist()))
        try:
            with torch.no_grad():
                loss = float(loss_fn(base_model))
        finally:
            with torch.no_grad():
                for m, weight in saved.items():
                    get_linear(base_model, m).weight.copy_(weight)
        return loss + l1 * float(np.abs(w).mean())

    weights, name = _minimise(objective, len(experts), budget, bounds, seed)
    final = objective(weights)
    evaluations -= 1  # the re-evaluation of the recommendation is not part of the budget
    return LoraHubResult(
        weights, final, lorahub_task_vector(experts, weights.tolist()), evaluations, name
    )
