"""The rate harness: run a method for several horizons T, fit the log–log slope of the stationarity
measure against T, with bootstrap intervals, and compare it with the theory's exponent.

For each T the method runs from ``problem.x0`` with its T-dependent step rule
(:func:`~adagrad_heavytail.schedules.theory_params`) on ``seeds`` independent noise streams at once
(a ``(seeds, d)`` array). The per-seed measure is, by ``metric``:

- ``"avg_grad_norm_l2"``: (1/T) Σ_{t=1..T} ‖∇f(x_t)‖₂ (the theorems' quantity),
- ``"avg_grad_norm_l1"``: the same in ‖·‖₁ (the AdaGrad theorem's norm),
- ``"min_grad_norm"``: min_t ‖∇f(x_t)‖₂,
- ``"tail_avg_grad_norm_l2"``: the average of ‖∇f(x_t)‖₂ over the second half, t = ⌊T/2⌋+1..T
  (see :data:`TAIL_FRACTION`). It is at most twice the full average, so it obeys the theorems' rate
  bound too, and it drops the first descent from x₁, which adds a C/T term to the full average that
  hides the noise-limited rate in a short window of T.

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
from typing import Any

import numpy as np

from adagrad_heavytail import theory
from adagrad_heavytail.methods import stepper
from adagrad_heavytail.noise import Noise
from adagrad_heavytail.problems import NoisyOracle, Problem
from adagrad_heavytail.schedules import theory_params

#: per-seed metrics of :func:`run_horizon`; ``final_value`` is f(x_T), the others are gradient norms
METRICS: tuple[str, ...] = (
    "avg_grad_norm_l2",
    "avg_grad_norm_l1",
    "min_grad_norm",
    "tail_avg_grad_norm_l2",
    "final_value",
)
#: ``tail_avg_grad_norm_l2`` averages over the steps t > T·(1 - TAIL_FRACTION): the second half
TAIL_FRACTION = 0.5
STATISTICS: tuple[str, ...] = ("mean", "median")
MIN_HORIZONS = 3
MIN_SEEDS = 8
#: heuristic tolerance of :func:`compare_to_theory` for T ≤ 2^14 (Õ hides logs; pre-asymptotic)
DEFAULT_TOLERANCE = 0.05
_CHUNK = 256  # noise is drawn this many steps at a time


def tail_start_step(T: int) -> int:
    """How many of the first steps ``tail_avg_grad_norm_l2`` leaves out: ⌊T·(1 - TAIL_FRACTION)⌋,
    at most T - 1 (the last step always counts)."""
    return min(int(T * (1 - TAIL_FRACTION)), T - 1)


def run_horizon(
    method: str,
    oracle: NoisyOracle,
    T: int,
    seeds: int,
    params: Mapping[str, Any],
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
    sum_tail = np.zeros(seeds)
    tail_start = tail_start_step(T)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for start in range(0, T, _CHUNK):
            noise = oracle.draw((min(_CHUNK, T - start), seeds), rng)
            for i, xi in enumerate(noise):
                grad = problem.grad(x)
                l2 = np.sqrt((grad * grad).sum(-1))
                sum_l2 += l2
                if start + i >= tail_start:
                    sum_tail += l2
                sum_l1 += np.abs(grad).sum(-1)
                np.minimum(min_l2, l2, out=min_l2)
                x, state = step.step(x, grad + xi, state)
    out = {
        "avg_grad_norm_l2": sum_l2 / T,
        "avg_grad_norm_l1": sum_l1 / T,
        "min_grad_norm": min_l2,
        "tail_avg_grad_norm_l2": sum_tail / (T - tail_start),
        "final_value": np.asarray(problem.value(x), dtype=float),
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
    lr_scale: float = 1.0,
) -> RateResult:
    """Measure ``method``'s rate exponent on ``problem`` with ``noise`` (see the module doc).

    Step rules come from :func:`~adagrad_heavytail.schedules.theory_params` with the problem's L,
    Δ and d, σ = the oracle's :meth:`~adagrad_heavytail.problems.NoisyOracle.vector_scale` and ``p`` (None:
    the rule that does not know p). ``params`` overrides them: a dict, or ``T -> dict``.
    ``lr_scale`` multiplies the resulting ``lr`` at every T (the multiplier :func:`tune_step` picks).
    """
    if not (isinstance(lr_scale, (int, float)) and math.isfinite(lr_scale) and lr_scale > 0):
        raise ValueError(f"lr_scale must be a finite number > 0, got {lr_scale!r}")
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
        merged = {**rule, **extra}
        merged["lr"] = merged["lr"] * lr_scale
        per_T.append(merged)
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


#: multipliers of the default step (``theory_params``' lr) every method is tuned over, alike
TUNING_GRID: tuple[float, ...] = (0.25, 1.0, 4.0, 16.0)
#: when the best multiplier is the grid's smallest or largest, the grid grows by this factor in that
#: direction, at most :data:`TUNING_EXTENSIONS` times: the same rule for every method
TUNING_STEP = 4.0
TUNING_EXTENSIONS = 2
_TUNING_STREAM = 1  # tuning noise: SeedSequence(seed, spawn_key=(T, 1, k)), never a sweep's (T,)


@dataclass(frozen=True)
class Tuning:
    """What :func:`tune_step` measured: the chosen multiplier and the score of each one.

    ``grid`` is every multiplier tried, ascending (the initial grid plus its extensions);
    ``interior``: the chosen one has a tried neighbour on both sides, so the tuning bracketed the
    optimum; ``extensions``: how many times the grid grew.
    """

    method: str
    multiplier: float
    grid: tuple[float, ...]
    scores: tuple[float, ...]  # the statistic of the metric at horizon T, per multiplier
    T: int
    seeds: int
    interior: bool = False
    extensions: int = 0


def _score_block(
    method: str,
    oracle: NoisyOracle,
    rule: Mapping[str, Any],
    factors: Sequence[float],
    T: int,
    seeds: int,
    metric: str,
    statistic: str,
    rng: np.random.Generator,
) -> list[float]:
    """The statistic of ``metric`` per multiplier, every multiplier at once, one block of rows each."""
    block = dict(rule)
    block["lr"] = rule["lr"] * np.repeat(np.asarray(factors, dtype=float), seeds)[:, None]
    values = run_horizon(method, oracle, T, seeds * len(factors), block, rng)[metric]
    scores = _statistic(values.reshape(len(factors), seeds), statistic)
    return [float(s) if math.isfinite(s) else math.inf for s in scores]


def _edge_extension(grid: Sequence[float], scores: Sequence[float], step: float) -> float | None:
    """The multiplier to try next: one ``step`` beyond the grid's edge when the best score sits
    there, else None (the best has a neighbour on both sides)."""
    best = int(np.argmin(scores))  # first minimum: the smaller multiplier on ties
    if best == 0:
        return grid[0] / step
    if best == len(grid) - 1:
        return grid[-1] * step
    return None


def tune_step(
    method: str,
    problem: Problem,
    noise: Noise,
    T: int,
    seeds: int = 16,
    *,
    grid: Sequence[float] = TUNING_GRID,
    extensions: int = TUNING_EXTENSIONS,
    metric: str = "avg_grad_norm_l2",
    statistic: str = "mean",
    p: float | None = None,
    coordinatewise: bool = True,
    seed: int = 0,
) -> Tuning:
    """Pick the multiplier of ``method``'s default step that minimises the statistic of ``metric``
    after ``T`` steps, on ``seeds`` tuning streams of their own.

    Every method gets the same grid, extension rule, horizon and seeds (equal tuning effort). When
    the best multiplier is the grid's smallest (largest), the multiplier :data:`TUNING_STEP` times
    smaller (larger) is tried too, up to ``extensions`` times, so the choice is bracketed unless the
    extensions run out (``Tuning.interior`` says which). The tuning noise comes from
    ``SeedSequence(seed, spawn_key=(T, 1, k))`` for the k-th extension (k = 0: the grid), disjoint
    from every stream :func:`rate_sweep` evaluates on (``spawn_key=(T,)``). A multiplier with a
    diverged seed scores ``inf``; ties go to the smaller multiplier.
    """
    _validate([1, 2, 3], seeds, metric, statistic, 3)
    if not (isinstance(T, int) and T >= 1):
        raise ValueError(f"T must be an integer >= 1, got {T!r}")
    if not (isinstance(extensions, int) and extensions >= 0):
        raise ValueError(f"extensions must be an integer >= 0, got {extensions!r}")
    factors = sorted(float(m) for m in grid)
    if not factors or not all(math.isfinite(m) and m > 0 for m in factors):
        raise ValueError(f"grid must hold finite multipliers > 0, got {list(grid)}")
    oracle = NoisyOracle(problem, noise, coordinatewise=coordinatewise)
    rule = theory_params(
        method, T, p=p, L=problem.L, Delta=problem.Delta, sigma=oracle.vector_scale(), d=problem.d
    )

    def score(block: Sequence[float], k: int) -> list[float]:
        key = (T, _TUNING_STREAM) if k == 0 else (T, _TUNING_STREAM, k)
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))
        return _score_block(method, oracle, rule, block, T, seeds, metric, statistic, rng)

    scores = score(factors, 0)
    done = 0
    while done < extensions and (nxt := _edge_extension(factors, scores, TUNING_STEP)) is not None:
        done += 1
        new = score([nxt], done)[0]
        at = 0 if nxt < factors[0] else len(factors)
        factors.insert(at, nxt)
        scores.insert(at, new)
    best = int(np.argmin(scores))
    interior = 0 < best < len(factors) - 1
    return Tuning(method, factors[best], tuple(factors), tuple(scores), T, seeds, interior, done)


@dataclass(frozen=True)
class Verdict:
    """``measured`` = -slope against the band ``[bound - tolerance, ceiling + tolerance]``.

    ``bound`` is the method's exponent at p; ``ceiling`` = max(bound, the minimax exponent at p).
    ``held``: measured inside the band (two-sided) or above its lower end (``two_sided=False``);
    ``too_slow`` / ``too_fast`` say which side failed. ``ci_held``: the same test on the bootstrap
    interval (wholly inside the band, or its pessimistic end above the lower end).
    """

    method: str
    p: float
    measured: float
    bound: float
    tolerance: float
    held: bool
    ci_held: bool
    measured_ci: tuple[float, float]
    ceiling: float = math.inf
    two_sided: bool = True
    too_slow: bool = False
    too_fast: bool = False


def theory_band(
    method: str, p: float, tolerance: float = DEFAULT_TOLERANCE, *, two_sided: bool = True
) -> tuple[float, float]:
    """``(bound, ceiling)`` of :func:`compare_to_theory`: the band is [bound - tol, ceiling + tol]."""
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    bound = theory.exponent(method, p)
    return bound, (max(bound, theory.exponent("minimax", p)) if two_sided else math.inf)


def band_margin(
    exponent: float, method: str, p: float, tolerance: float = DEFAULT_TOLERANCE
) -> float:
    """How far ``exponent`` lies inside the two-sided band (negative: outside, by that much)."""
    bound, ceiling = theory_band(method, p, tolerance)
    return min(exponent - (bound - tolerance), ceiling + tolerance - exponent)


def compare_to_theory(
    result: RateResult,
    method: str,
    p: float,
    tolerance: float = DEFAULT_TOLERANCE,
    *,
    two_sided: bool = True,
) -> Verdict:
    """Does ``result``'s exponent sit where ``theory.exponent(method, p)`` puts it?

    Lower side: the bound is an upper bound on the error (a lower bound on the exponent), so being
    slower than it by more than ``tolerance`` fails. Upper side (``two_sided=True``, the default):
    being faster than the ceiling max(bound, minimax exponent (p-1)/(3p-2)) by more than
    ``tolerance`` fails too. No method's guarantee over the class beats the minimax rate, so a
    steeper slope means the window still shows the deterministic transient (a step decaying too
    fast, a step too small to reach the noise floor) rather than the rate the theorem is about; at
    p = 2 the band is 1/4 ± tolerance. ``two_sided=False`` is the one-sided check ("at least as
    fast as the bound"). ``tolerance`` (default 0.05 for T ≤ 2^14) is a heuristic: Õ hides log
    factors and a finite window of T is pre-asymptotic.
    """
    bound, ceiling = theory_band(method, p, tolerance, two_sided=two_sided)
    lo, hi = -result.ci[1], -result.ci[0]
    measured = result.exponent
    too_slow = bool(measured < bound - tolerance)
    too_fast = bool(measured > ceiling + tolerance)
    return Verdict(
        method=method,
        p=p,
        measured=measured,
        bound=bound,
        tolerance=tolerance,
        held=not (too_slow or too_fast),
        ci_held=bool(lo >= bound - tolerance and hi <= ceiling + tolerance),
        measured_ci=(lo, hi),
        ceiling=ceiling,
        two_sided=two_sided,
        too_slow=too_slow,
        too_fast=too_fast,
    )


__all__ = [
    "DEFAULT_TOLERANCE",
    "METRICS",
    "TAIL_FRACTION",
    "TUNING_EXTENSIONS",
    "TUNING_GRID",
    "TUNING_STEP",
    "RateResult",
    "Tuning",
    "Verdict",
    "band_margin",
    "compare_to_theory",
    "log_log_slope",
    "rate_sweep",
    "run_horizon",
    "tail_start_step",
    "theory_band",
    "tune_step",
]
