"""The rate harness: run a method for several horizons T, fit the log–log slope of the stationarity
measure against T, with bootstrap intervals, and compare it with the theory's exponent.

For each T the method runs from ``problem.x0`` with its T-dependent step rule
(:func:`~adagrad_heavytail.schedules.theory_params`) on ``seeds`` independent noise streams at once
(a ``(seeds, d)`` array). The per-seed measure is, by ``metric``:

- ``"avg_grad_norm_l2"``: (1/T) Σ_{t=1..T} ‖∇f(x_t)‖₂ (the theorems' quantity),
- ``"avg_grad_norm_l1"``: the same in ‖·‖₁ (the AdaGrad theorem's norm),
- ``"min_grad_norm"``: min_t ‖∇f(x_t)‖₂.

The slope is the least-squares slope of log(statistic over seeds) on log T over the largest
``fit_last`` horizons; the interval is the 2.5–97.5 % percentile range of the slope over ``bootstrap``
resamplings of the seeds (independently per T). Means are reported with medians and the 10/90 %
quantiles, since one heavy-tailed seed can move a mean.

Horizons run through joblib (``n_jobs``); each T draws from its own ``SeedSequence(seed,
spawn_key=(T,))``, so the numbers do not depend on ``n_jobs`` or on which backend (Dask, Ray via
``joblib.parallel_config``) runs them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from adagrad_heavytail import theory
from adagrad_heavytail.methods import stepper
from adagrad_heavytail.noise import Noise
from adagrad_heavytail.problems import NoisyOracle, Problem
from adagrad_heavytail.schedules import theory_params

METRICS: tuple[str, ...] = ("avg_grad_norm_l2", "avg_grad_norm_l1", "min_grad_norm")
STATISTICS: tuple[str, ...] = ("mean", "median")
MIN_HORIZONS = 3
MIN_SEEDS = 8
#: heuristic tolerance of :func:`compare_to_theory` for T ≤ 2^14 (Õ hides logs; pre-asymptotic)
DEFAULT_TOLERANCE = 0.05
_CHUNK = 256  # noise is drawn this many steps at a time


def run_horizon(
    method: str,
    oracle: NoisyOracle,
    T: int,
    seeds: int,
    params: Mapping[str, float],
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """One run of ``T`` steps on ``seeds`` noise streams: every metric, per seed (shape ``(seeds,)``).

    A seed whose iterate leaves the floats (SGD under heavy tails can) gets ``inf``.
    """
    problem = oracle.problem
    step = stepper(method, params)
    x = np.broadcast_to(problem.x0, (seeds, problem.d)).copy()
    state = step.init(x)
    sum_l2 = np.zeros(seeds)
    sum_l1 = np.zeros(seeds)
    min_l2 = np.full(seeds, np.inf)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for start in range(0, T, _CHUNK):
            noise = oracle.draw((min(_CHUNK, T - start), seeds), rng)
            for xi in noise:
                grad = problem.grad(x)
                l2 = np.sqrt((grad * grad).sum(-1))
                sum_l2 += l2
                sum_l1 += np.abs(grad).sum(-1)
                np.minimum(min_l2, l2, out=min_l2)
                x, state = step.step(x, grad + xi, state)
    out = {
        "avg_grad_norm_l2": sum_l2 / T,
        "avg_grad_norm_l1": sum_l1 / T,
        "min_grad_norm": min_l2,
    }
    bad = ~np.all(np.isfinite(x), axis=-1)
    for values in out.values():
        values[bad | ~np.isfinite(values)] = np.inf
    return out


@dataclass
class RateResult:
    """What :func:`rate_sweep` measured. ``slope`` < 0 is convergence; ``exponent = -slope``."""

    method: str
    metric: str
    statistic: str
    Ts: list[int]
    values: np.ndarray = field(repr=False)  # (len(Ts), seeds) per-seed metric
    slope: float
    ci: tuple[float, float]
    fit_last: int
    params: list[dict[str, float]] = field(repr=False)
    table: list[dict[str, float]] = field(repr=False)

    @property
    def exponent(self) -> float:
        return -self.slope

    @property
    def seeds(self) -> int:
        return int(self.values.shape[1])


def _statistic(values: np.ndarray, statistic: str) -> np.ndarray:
    return values.mean(-1) if statistic == "mean" else np.median(values, -1)


def log_log_slope(Ts: Sequence[int], y: np.ndarray) -> np.ndarray:
    """Least-squares slope of log y on log T over the last axis of ``y`` (any leading axes)."""
    u = np.log(np.asarray(Ts, dtype=np.float64))
    u = u - u.mean()
    with np.errstate(divide="ignore", invalid="ignore"):  # a diverged run's inf gives a NaN slope
        ly = np.log(y)
        return ((ly - ly.mean(-1, keepdims=True)) * u).sum(-1) / (u * u).sum()


def _bootstrap_ci(
    Ts: Sequence[int], values: np.ndarray, statistic: str, n: int, rng: np.random.Generator
) -> tuple[float, float]:
    if n == 0:
        return (math.nan, math.nan)
    nT, R = values.shape
    idx = rng.integers(0, R, (n, nT, R))
    resampled = np.take_along_axis(values[None], idx, axis=2)  # (n, nT, R)
    slopes = log_log_slope(Ts, _statistic(resampled, statistic))
    lo, hi = np.nanpercentile(slopes, [2.5, 97.5]) if np.isfinite(slopes).any() else (math.nan,) * 2
    return (float(lo), float(hi))


def _validate(
    Ts: Sequence[int], seeds: int, metric: str, statistic: str, fit_last: int
) -> list[int]:
    horizons = sorted({int(T) for T in Ts})
    if len(horizons) < MIN_HORIZONS or horizons[0] < 1:
        raise ValueError(
            f"need at least {MIN_HORIZONS} distinct horizons T >= 1 for a slope, got {list(Ts)}"
        )
    if not (isinstance(seeds, (int, np.integer)) and seeds >= MIN_SEEDS):
        raise ValueError(
            f"need at least {MIN_SEEDS} seeds for a slope and its interval, got {seeds!r}"
        )
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {STATISTICS}, got {statistic!r}")
    if not MIN_HORIZONS <= fit_last <= len(horizons):
        raise ValueError(
            f"fit_last must lie in [{MIN_HORIZONS}, {len(horizons)}] (the horizons given), got {fit_last}"
        )
    return horizons


def rate_sweep(
    method: str,
    problem: Problem,
    noise: Noise,
    Ts: Sequence[int] = tuple(2 ** np.arange(7, 15)),
    seeds: int = 64,
    *,
    metric: str = "avg_grad_norm_l2",
    statistic: str = "mean",
    fit_last: int = 5,
    bootstrap: int = 1000,
    p: float | None = None,
    params: Mapping[str, float] | Callable[[int], Mapping[str, float]] | None = None,
    coordinatewise: bool = True,
    seed: int = 0,
    n_jobs: int = 1,
) -> RateResult:
    """Measure ``method``'s rate exponent on ``problem`` with ``noise`` (see the module doc).

    Step rules come from :func:`~adagrad_heavytail.schedules.theory_params` with the problem's L,
    Δ and d, σ = the oracle's :meth:`~adagrad_heavytail.problems.NoisyOracle.vector_scale` and ``p`` (None:
    the rule that does not know p). ``params`` overrides them: a dict, or ``T -> dict``.
    """
    from joblib import Parallel, delayed

    horizons = _validate(Ts, seeds, metric, statistic, fit_last)
    oracle = NoisyOracle(problem, noise, coordinatewise=coordinatewise)
    sigma = oracle.vector_scale()
    per_T = []
    for T in horizons:
        rule = theory_params(
            method, T, p=p, L=problem.L, Delta=problem.Delta, sigma=sigma, d=problem.d
        )
        extra = params(T) if callable(params) else (params or {})
        per_T.append({**rule, **extra})
    runs = Parallel(n_jobs=n_jobs)(
        delayed(run_horizon)(
            method,
            oracle,
            T,
            seeds,
            rule,
            np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(T,))),
        )
        for T, rule in zip(horizons, per_T, strict=True)
    )
    values = np.stack([run[metric] for run in runs])
    fit = slice(len(horizons) - fit_last, None)
    stat = _statistic(values, statistic)
    slope = float(log_log_slope(horizons[fit], stat[fit]))
    boot_rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0,)))
    ci = _bootstrap_ci(horizons[fit], values[fit], statistic, bootstrap, boot_rng)
    q10, q50, q90 = np.quantile(values, [0.1, 0.5, 0.9], axis=1)
    table = [
        {
            "T": T,
            "mean": float(values[i].mean()),
            "median": float(q50[i]),
            "q10": float(q10[i]),
            "q90": float(q90[i]),
            "diverged": float(np.mean(~np.isfinite(values[i]))),
        }
        for i, T in enumerate(horizons)
    ]
    return RateResult(
        method, metric, statistic, horizons, values, slope, ci, fit_last, per_T, table
    )


@dataclass(frozen=True)
class Verdict:
    """``measured`` = -slope against the bound's exponent: held when measured ≥ bound - tolerance.

    ``ci_held``: the same test on the pessimistic end of the bootstrap interval (the larger slope).
    """

    method: str
    p: float
    measured: float
    bound: float
    tolerance: float
    held: bool
    ci_held: bool
    measured_ci: tuple[float, float]


def compare_to_theory(
    result: RateResult, method: str, p: float, tolerance: float = DEFAULT_TOLERANCE
) -> Verdict:
    """One-sided: does ``result`` converge at least as fast as ``theory.exponent(method, p)``?

    The bound is an upper bound on the error (a lower bound on the exponent), so only being slower
    than it by more than ``tolerance`` fails. ``tolerance`` (default 0.05 for T ≤ 2^14) is a heuristic:
    Õ hides log factors and a finite window of T is pre-asymptotic.
    """
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    bound = theory.exponent(method, p)
    lo, hi = -result.ci[1], -result.ci[0]
    return Verdict(
        method=method,
        p=p,
        measured=result.exponent,
        bound=bound,
        tolerance=tolerance,
        held=bool(result.exponent >= bound - tolerance),
        ci_held=bool(lo >= bound - tolerance),
        measured_ci=(lo, hi),
    )


__all__ = [
    "DEFAULT_TOLERANCE",
    "METRICS",
    "RateResult",
    "Verdict",
    "compare_to_theory",
    "log_log_slope",
    "rate_sweep",
    "run_horizon",
]
