"""The serving experiments behind ``python -m duetserve.reproduce`` and the benchmarks.

The headline metric is the *SLO-compliant rate*: the highest request rate at which a policy finishes
every request with P99 time-between-tokens within the TBT SLO and P99 time-to-first-token within the
TTFT SLO. It is found by doubling then bisecting the rate (in log space) on one trace whose arrival
times are rescaled (common random numbers, so compliance is close to monotone in the rate).

Two ablations of DuetServe live here, for the reproduction's negative controls: spatial execution
switched off (only the TBT-aware chunk cap of the fallback remains) and a random feasible split in
place of the optimizer's.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from duetserve.hardware import HardwareProfile
from duetserve.optimizer import PartitionOptimizer
from duetserve.roofline import BatchStats, RooflineModel
from duetserve.shapes import ModelShape
from duetserve.simulator import Policy, SimResult, simulate
from duetserve.workloads import Request, bursty_trace, poisson_trace, scale_rate, shifting_trace

MODELS: dict[str, Callable[[], ModelShape]] = {
    "Qwen3-8B": ModelShape.qwen3_8b,
    "Qwen3-14B": ModelShape.qwen3_14b,
}
WORKLOADS = ("mooncake", "bursty", "shifting", "shuffled", "conversation", "code")


def build_model(model: str, bw_saturation: float = 0.35, hardware: str = "H100") -> RooflineModel:
    """Qwen3-8B/14B on the H100 (or H200) profile with the given bandwidth-saturation point."""
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; expected one of {sorted(MODELS)}")
    presets = {"H100": HardwareProfile.h100_sxm_spec, "H200": HardwareProfile.h200_spec}
    if hardware not in presets:
        raise ValueError(f"unknown hardware {hardware!r}; expected one of {sorted(presets)}")
    return RooflineModel(MODELS[model](), presets[hardware](bw_saturation=bw_saturation))


Roof = Literal["both", "flops", "bandwidth"]


def optimistic_model(model: RooflineModel, factor: float, roof: Roof = "both") -> RooflineModel:
    """``model`` on a GPU whose FLOP/s (``roof="flops"``), HBM bandwidth (``"bandwidth"``) or both
    are ``factor`` times higher: a planner that under-predicts compute-bound work (prefill),
    memory-bound work (decode) or every iteration, for the model-error controls.

    ``"both"`` with tp = 1 and no launch overhead scales every prediction by ``1 / factor``: planning
    for ``SLO / factor`` with it is then the exact planner, so a margin test needs a one-roof error.
    """
    if not (math.isfinite(factor) and factor > 0):
        raise ValueError(f"factor must be a finite number > 0, got {factor!r}")
    if roof not in ("both", "flops", "bandwidth"):
        raise ValueError(f"roof must be 'both', 'flops' or 'bandwidth', got {roof!r}")
    hw = model.hw
    f_flops = factor if roof in ("both", "flops") else 1.0
    f_bw = factor if roof in ("both", "bandwidth") else 1.0
    fast = dataclasses.replace(
        hw,
        flops=tuple(f * f_flops for f in hw.flops),
        bandwidth=tuple(b * f_bw for b in hw.bandwidth),
    )
    return RooflineModel(model.shape, fast)


def unit_trace(workload: str, n: int, seed: int) -> list[Request]:
    """``n`` requests of ``workload`` at one request per second (rescale with :func:`scale_rate`)."""
    if workload in ("mooncake", "conversation", "code"):
        return poisson_trace(1.0, n, workload, seed)
    if workload == "bursty":  # conversation traffic plus bursts of 8 long prompts
        return bursty_trace(1.0, n, "conversation", burst_every_s=40.0, burst_size=8, seed=seed)
    if workload in ("shifting", "shuffled"):  # decode-heavy first half, prefill-heavy second half
        trace = shifting_trace(1.0, n, ("decode_heavy", "prefill_heavy"), seed)
        if workload == "shifting":
            return trace
        # The stationary control: the same requests and arrival times, lengths in random order.
        order = np.random.default_rng([seed, 1]).permutation(len(trace))
        return [
            dataclasses.replace(r, prompt_len=trace[j].prompt_len, output_len=trace[j].output_len)
            for r, j in zip(trace, order, strict=True)
        ]
    raise ValueError(f"unknown workload {workload!r}; expected one of {WORKLOADS}")


@dataclasses.dataclass(frozen=True)
class Slo:
    tbt_s: float = 0.05
    ttft_s: float = 3.0
    quantile: float = 0.99


@dataclasses.dataclass
class RateSearch:
    """The SLO-compliant rate and every (rate, metrics) point the search evaluated."""

    rate: float
    points: list[dict[str, float]]


def slo_rate(
    trace: Sequence[Request],
    policy: Policy,
    model: RooflineModel,
    slo: Slo,
    *,
    start: float = 1.0,
    max_rate: float = 64.0,
    bisections: int = 5,
    **sim_kw: Any,
) -> RateSearch:
    """The highest rate (requests/s per GPU) at which ``policy`` meets ``slo`` on ``trace``
    (given at one request per second). 0 when even ``start / 8`` fails."""
    points: list[dict[str, float]] = []

    def ok(rate: float) -> bool:
        # A disaggregated pair gets the rate of two GPUs: its per-GPU rate is what we compare.
        gpus = 2 if policy == "disaggregated" else 1
        res = simulate(scale_rate(trace, rate * gpus), policy, model, tbt_slo_s=slo.tbt_s, **sim_kw)
        meets = res.meets(slo.tbt_s, slo.ttft_s, slo.quantile)
        points.append({"rate": rate, "meets": float(meets), **res.summary()})
        return meets

    lo = start
    while not ok(lo):
        lo /= 2
        if lo < start / 8:
            return RateSearch(0.0, points)
    hi = lo * 2
    while hi <= max_rate and ok(hi):
        lo, hi = hi, hi * 2
    if hi > max_rate:
        return RateSearch(lo, points)
    for _ in range(bisections):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return RateSearch(lo, points)


def run_at(
    trace: Sequence[Request],
    rate: float,
    policy: Policy,
    model: RooflineModel,
    slo: Slo,
    **sim_kw: Any,
) -> SimResult:
    return simulate(scale_rate(trace, rate), policy, model, tbt_slo_s=slo.tbt_s, **sim_kw)


class NoSpatialOptimizer(PartitionOptimizer):
    """Ablation: never split the SMs. An iteration that misses the SLO only gets the fallback's
    TBT-aware prefill cap (what a chunk-size-tuning scheduler does)."""

    def _best_split(self, *args: Any, **kwargs: Any) -> None:
        return None


class RandomSplitOptimizer(PartitionOptimizer):
    """Ablation: a uniformly random feasible split instead of the throughput-maximising one."""

    def __init__(self, *args: Any, seed: int = 0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._rng = np.random.default_rng(seed)

    def _best_split(
        self,
        d_stats: BatchStats,
        p_stats: BatchStats,
        t_d: np.ndarray,
        t_p: np.ndarray,
        max_lookahead: int,
    ) -> tuple[int, int, float, float, float] | None:
        ks = np.maximum(np.ceil(t_p / t_d), 1.0)
        ok = np.flatnonzero((t_d <= self.tbt_slo_s) & (ks <= max_lookahead))
        if ok.size == 0:
            return None
        col = int(self._rng.choice(ok))
        score = self.objective(ks, d_stats.decode_seqs, p_stats.prefill_tokens, t_d, t_p)
        return (
            int(self.candidates[col]),
            int(ks[col]),
            float(t_d[col]),
            float(t_p[col]),
            float(score[col]),
        )
