"""The router claims of the reproduction, held out and over several seeds.

Each seed draws fresh training, validation and test tasks. Every learned router arm (official label,
quality-only label, and their shuffled-label controls) is tried on the validation tasks at every
``tau`` in :data:`TAUS` and every ``delta0`` in :data:`DELTA0_GRID`; the validation set alone picks
its ``tau`` and the ``delta0`` points that trace its curve (:func:`choose`). Only then are the chosen
settings, the fixed thresholds, the true-difficulty ceiling and the random controls run on the test
tasks. A claim's figure is the mean over seeds of the per-seed gain, with the s.e. across seeds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

TAUS = (0.1, 0.02)  # the official inference tau, and a near-hard threshold
DELTA0_GRID = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
THRESHOLDS = (1, 2, 3, 4, 5, 6, 8, 10)
RANDOM_P = (0.2, 0.5, 0.8)
QUALITY_LABEL: dict[str, Any] = {"lambda_t": 0.0, "lambda_k": 0.0}
# name -> (label weights, shuffled quality labels)
ROUTER_ARMS: dict[str, tuple[dict[str, Any], bool]] = {
    "adaptive": ({}, False),
    "shuffled": ({}, True),
    "qlabel": (QUALITY_LABEL, False),
    "qshuffled": (QUALITY_LABEL, True),
}


class TrueDifficultyRouter:
    """The fixture's ceiling: the fixed threshold applied to the TRUE difficulty the simulator draws
    answers from, not to the planner's noisy Difficulty. If even this cannot beat the fixed-threshold
    curve by 2 s.e., no router can show dominance on this fixture."""

    def __init__(self, threshold: int) -> None:
        from hybridflow.router import ThresholdRouter

        self.inner = ThresholdRouter(threshold)

    def route(self, question: str, subtask: Any, **kw: Any) -> Any:
        from hybridflow.sim import _PART, Part

        match = _PART.search(subtask.task)
        if match is not None:
            part = Part(match.group(1), int(match.group(2)), match.group(3), int(match.group(4)))
            subtask = dataclasses.replace(subtask, difficulty=part.difficulty)
        return self.inner.route(question, subtask, **kw)


@dataclasses.dataclass(frozen=True)
class StudyConfig:
    seed: int
    n_train: int
    n_val: int
    n_test: int
    epochs: int
    thresholds: tuple[int, ...] = THRESHOLDS
    delta0_grid: tuple[float, ...] = DELTA0_GRID
    taus: tuple[float, ...] = TAUS
    random_p: tuple[float, ...] = RANDOM_P


def gains_at(
    curve: Sequence[tuple[float, float]], fixed: dict[str, tuple[float, float]]
) -> dict[str, float]:
    """Accuracy of ``curve`` (cost, acc), interpolated at each fixed point's cost, minus the point's;
    keyed by the fixed point's name, for the points inside the curve's cost range only."""
    xs, ys = zip(*sorted(curve), strict=False)
    return {
        name: float(np.interp(c, xs, ys)) - a
        for name, (c, a) in fixed.items()
        if min(xs) <= c <= max(xs)
    }


def choose(
    points: dict[float, dict[float, tuple[float, float]]], fixed: dict[str, tuple[float, float]]
) -> tuple[float, list[float], float]:
    """Pick ``tau`` and the ``delta0`` points from validation ``points[tau][delta0] = (cost, acc)``.

    The ``delta0`` points kept are those whose cost lies inside the fixed curve's cost range, plus the
    nearest one outside on each side (so the curve spans the range); ``tau`` is the one whose kept
    curve gains most over the fixed points. Returns (tau, delta0s, validation gain)."""
    lo = min(c for c, _ in fixed.values())
    hi = max(c for c, _ in fixed.values())
    best: tuple[float, list[float], float] | None = None
    for tau, by_d0 in points.items():
        order = sorted(by_d0, key=lambda d: by_d0[d][0])
        inside = [i for i, d in enumerate(order) if lo <= by_d0[d][0] <= hi]
        if inside:
            first, last = max(inside[0] - 1, 0), min(inside[-1] + 1, len(order) - 1)
        else:  # the whole curve outside the range: keep its two points nearest to it
            first, last = 0, len(order) - 1
        kept = sorted(order[first : last + 1])
        gains = gains_at([by_d0[d] for d in kept], fixed)
        gain = float(np.mean(list(gains.values()))) if gains else -np.inf
        if best is None or gain > best[2]:
            best = (tau, kept, gain)
    assert best is not None
    return best


def _point(arm: dict[str, Any]) -> tuple[float, float]:
    return float(np.mean(arm["cloud_tokens"])), float(np.mean(arm["correct"]))


def _run(routers: dict[str, Any], tasks: Sequence[Any]) -> dict[str, tuple[float, float]]:
    """Each router over ``tasks`` on the simulated clock: (mean cloud tokens, accuracy)."""
    from hybridflow.endpoints import ModelEndpoint
    from hybridflow.experiments import run_arm
    from hybridflow.pipeline import HybridFlow
    from hybridflow.sim import CLOUD, EDGE, PLANNER, sim_client_factory

    models = {m.name: m for m in (EDGE, CLOUD, PLANNER)}
    # in-process simulated clients: the URL is never dialled
    eps = {m.name: ModelEndpoint(m.name, "http://127.0.0.1:9/v1") for m in models.values()}
    factory = sim_client_factory(models, time_scale=1.0)
    out = {}
    for name, router in routers.items():
        flow = HybridFlow(eps[EDGE.name], eps[CLOUD.name], router, planner=eps[PLANNER.name],
                          max_workers=8, seed=0, client_factory=factory)  # fmt: skip
        out[name] = _point(run_arm(flow, tasks, concurrency=8, time_scale=1.0, virtual=True))
    return out


def run_seed(cfg: StudyConfig) -> dict[str, Any]:
    """One seed: train the router arms, choose on validation, measure on test (JSON-friendly)."""
    import copy

    from hybridflow.experiments import profiles_for, train_router
    from hybridflow.router import RandomRouter, ThresholdRouter
    from hybridflow.sim import make_tasks

    s = cfg.seed
    profiles = profiles_for(make_tasks(cfg.n_train, seed=1000 + s))
    val, test = make_tasks(cfg.n_val, seed=4000 + s), make_tasks(cfg.n_test, seed=6000 + s)
    trained = {
        arm: train_router(profiles, shuffle=shuffle, seed=s, epochs=cfg.epochs, **label)
        for arm, (label, shuffle) in ROUTER_ARMS.items()
    }

    def setting(arm: str, tau: float, d0: float) -> Any:
        router = copy.copy(trained[arm])
        router.tau, router.delta0 = tau, d0
        return router

    fixed = {f"fixed t={t}": ThresholdRouter(t) for t in cfg.thresholds}
    grid = {
        (a, tau, d0): setting(a, tau, d0)
        for a in trained
        for tau in cfg.taus
        for d0 in cfg.delta0_grid
    }
    val_pts = _run(fixed | {repr(k): r for k, r in grid.items()}, val)
    val_fixed = {k: val_pts[k] for k in fixed}
    chosen: dict[str, dict[str, Any]] = {}
    for arm in trained:
        pts = {
            tau: {d0: val_pts[repr((arm, tau, d0))] for d0 in cfg.delta0_grid} for tau in cfg.taus
        }
        tau, d0s, gain = choose(pts, val_fixed)
        chosen[arm] = {"tau": tau, "delta0": d0s, "val_gain": gain}
    test_routers: dict[str, Any] = dict(fixed)
    test_routers |= {f"oracle t={t}": TrueDifficultyRouter(t) for t in cfg.thresholds}
    test_routers |= {f"random p={p}": RandomRouter(p, seed=s) for p in cfg.random_p}
    for arm, c in chosen.items():
        test_routers |= {f"{arm} d0={d0}": setting(arm, c["tau"], d0) for d0 in c["delta0"]}
    return {"seed": s, "chosen": chosen, "test": _run(test_routers, test)}


def run_study(cfgs: Sequence[StudyConfig], workers: int) -> list[dict[str, Any]]:
    """:func:`run_seed` for each config, in ``workers`` processes (in this one when 1)."""
    if workers <= 1:
        return [run_seed(c) for c in cfgs]
    import concurrent.futures
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        return list(pool.map(run_seed, cfgs))


def seed_gains(result: dict[str, Any], prefix: str) -> tuple[float, float, int]:
    """One seed's mean gain of ``prefix``'s test curve over the fixed points in its range, the
    ceiling's mean gain over those same fixed points, and how many there were."""
    test = {k: tuple(v) for k, v in result["test"].items()}
    fixed = {k: v for k, v in test.items() if k.startswith("fixed")}
    curve = [v for k, v in test.items() if k.startswith(prefix + " ")]
    oracle = [v for k, v in test.items() if k.startswith("oracle ")]
    gains = gains_at(curve, fixed)
    if not gains:
        return float("nan"), float("nan"), 0
    ceiling = gains_at(oracle, {k: fixed[k] for k in gains})
    ceil = (
        float(np.mean(list(ceiling.values()))) if ceiling else float("nan")
    )  # --smoke's few points
    return float(np.mean(list(gains.values()))), ceil, len(gains)


def across_seeds(values: Sequence[float]) -> tuple[float, float]:
    """Mean and s.e. across seeds (NaN s.e. for one seed)."""
    x = np.asarray(values, dtype=float)
    se = float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("nan")
    return float(x.mean()), se
