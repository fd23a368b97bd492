"""Timing two callables in the same run and reporting their ratio.

Absolute times depend on the machine and its load; a ratio measured in one run, with the two candidates
interleaved, mostly does not. Benchmarks report :class:`Comparison`, never a bare time in a test.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any


def _sync() -> None:
    # torch only if the caller already imported it: numpy-only packages time without it.
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def time_once(fn: Callable[[], Any]) -> float:
    """Seconds for one call of ``fn``, with CUDA work finished on both sides."""
    _sync()
    start = time.perf_counter()
    fn()
    _sync()
    return time.perf_counter() - start


@dataclasses.dataclass(frozen=True)
class Comparison:
    """``candidate`` time over ``baseline`` time: below 1 means the candidate is faster."""

    name: str
    baseline_name: str
    ratio: float
    ratio_q25: float
    ratio_q75: float
    candidate_s: float
    baseline_s: float
    repeats: int

    def as_row(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def __str__(self) -> str:
        return (
            f"{self.name} / {self.baseline_name}: {self.ratio:.3f}x "
            f"[{self.ratio_q25:.3f}, {self.ratio_q75:.3f}] "
            f"({self.candidate_s * 1e3:.3g} ms vs {self.baseline_s * 1e3:.3g} ms, "
            f"median of {self.repeats})"
        )


def compare(
    candidate: Callable[[], Any],
    baseline: Callable[[], Any],
    *,
    name: str = "candidate",
    baseline_name: str = "baseline",
    repeats: int = 15,
    warmup: int = 2,
) -> Comparison:
    """Time ``candidate`` and ``baseline`` interleaved, ``repeats`` pairs after ``warmup`` pairs.

    The order within each pair alternates so that drift in the machine's load hits both alike. The
    ratio is the median of per-pair ratios; ``ratio_q25``/``ratio_q75`` give its spread.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0, got {repeats} and {warmup}")
    for _ in range(warmup):
        candidate()
        baseline()
    cand, base = [], []
    for i in range(repeats):
        if i % 2:
            base.append(time_once(baseline))
            cand.append(time_once(candidate))
        else:
            cand.append(time_once(candidate))
            base.append(time_once(baseline))
    ratios = sorted(c / b for c, b in zip(cand, base, strict=True))
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return Comparison(
        name=name,
        baseline_name=baseline_name,
        ratio=statistics.median(ratios),
        ratio_q25=q[0],
        ratio_q75=q[2],
        candidate_s=statistics.median(cand),
        baseline_s=statistics.median(base),
        repeats=repeats,
    )
