"""GPU hardware profiles: achievable FLOP/s Π(n) and HBM bandwidth B(n) as functions of the SM count.

DuetServe's roofline needs, for every candidate partition of ``n`` SMs, what a kernel confined to those
SMs can reach. A profile holds both curves as tables over SM counts (linear interpolation between
points, ``Π(0) = B(0) = 0``) and pre-tabulates them at every integer SM count so the optimizer can look
them up for all candidates with one fancy-index.

The presets use the card's spec sheet for the peaks; the *shapes* of the curves are assumptions (the
paper measures them): compute grows linearly with the SM count, bandwidth grows linearly until it
saturates at ``bw_saturation`` of the SMs. :meth:`HardwareProfile.from_measurements` builds a profile from
measured points (``benchmarks/gpu_profile.py`` measures them with green contexts).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

H100_SXM_FLOPS = 989e12  # dense bf16 tensor-core peak, spec sheet
H100_SXM_BW = 3.35e12  # HBM3, spec sheet
H200_BW = 4.8e12  # HBM3e, spec sheet; same GH100 die as the H100 SXM
NVLINK_BW = 450e9  # NVLink 4 per direction, what one all-reduce ring step sees
# Achievable fractions of the spec peaks (assumptions, documented in the README): large bf16 GEMMs on
# an H100 reach about 70 % of the dense peak, streaming copies about 90 % of the HBM peak.
COMPUTE_EFFICIENCY = 0.7
BANDWIDTH_EFFICIENCY = 0.9


def _check_curve(name: str, sm_counts: np.ndarray, values: np.ndarray) -> None:
    if values.shape != sm_counts.shape:
        raise ValueError(
            f"{name}: {values.size} values for {sm_counts.size} SM counts; give one per SM count"
        )
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name} must be finite, got {values.tolist()}")
    bad = np.flatnonzero(values <= 0)
    if bad.size:
        n = int(sm_counts[bad[0]])
        raise ValueError(
            f"{name} must be > 0 at every SM count > 0, got {values[bad[0]]} at {n} SMs"
        )
    drops = np.flatnonzero(np.diff(values) < 0)
    if drops.size:
        i = int(drops[0])
        raise ValueError(
            f"{name} must be non-decreasing in the SM count, got {values[i]:.4g} at "
            f"{int(sm_counts[i])} SMs then {values[i + 1]:.4g} at {int(sm_counts[i + 1])} SMs "
            "(take a running maximum of noisy measurements first if that is what you mean)"
        )


@dataclasses.dataclass(frozen=True)
class HardwareProfile:
    """One GPU: its SMs, their grouping into TPCs and the measured or assumed Π(n), B(n) curves.

    ``sm_counts`` are increasing SM counts in ``(0, n_sm]`` with ``flops[i]`` (FLOP/s) and
    ``bandwidth[i]`` (bytes/s) achievable on ``sm_counts[i]`` SMs; the last point should be ``n_sm``
    (curves are held flat past the last point). ``link_bw`` is the per-direction interconnect
    bandwidth the tensor-parallel all-reduce sees (bytes/s), ``launch_overhead_s`` a constant per
    iteration (kernel launches, sampling), ``memory_bytes`` the HBM capacity (KV-cache sizing).
    ``min_partition_sm`` is the smallest partition the SM-masking backend can grant.
    """

    name: str
    n_sm: int
    sms_per_tpc: int
    sm_counts: tuple[int, ...]
    flops: tuple[float, ...]
    bandwidth: tuple[float, ...]
    link_bw: float = NVLINK_BW
    launch_overhead_s: float = 0.0
    memory_bytes: float = 80e9
    min_partition_sm: int | None = None
    _flops_at: np.ndarray = dataclasses.field(init=False, repr=False, compare=False)
    _bw_at: np.ndarray = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for field in ("n_sm", "sms_per_tpc"):
            v = getattr(self, field)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise ValueError(f"{field} must be an integer, got {v!r}")
        if self.n_sm <= 0 or self.sms_per_tpc <= 0:
            raise ValueError(
                f"n_sm and sms_per_tpc must be > 0, got {self.n_sm} and {self.sms_per_tpc}"
            )
        if self.n_sm % self.sms_per_tpc:
            raise ValueError(
                f"n_sm={self.n_sm} is not a multiple of sms_per_tpc={self.sms_per_tpc}"
            )
        counts = np.asarray(self.sm_counts, dtype=np.int64)
        if counts.ndim != 1 or counts.size == 0:
            raise ValueError("sm_counts must be a non-empty sequence of SM counts")
        if counts[0] <= 0 or counts[-1] > self.n_sm or np.any(np.diff(counts) <= 0):
            raise ValueError(
                f"sm_counts must increase strictly within (0, n_sm={self.n_sm}], got {counts.tolist()}"
            )
        flops = np.asarray(self.flops, dtype=np.float64)
        bw = np.asarray(self.bandwidth, dtype=np.float64)
        _check_curve("flops", counts, flops)
        _check_curve("bandwidth", counts, bw)
        for field, low in (("link_bw", 0.0), ("launch_overhead_s", 0.0), ("memory_bytes", None)):
            v = getattr(self, field)
            ok = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
            if not (ok and math.isfinite(v) and (v >= low if low is not None else v > 0)):
                bound = ">= 0" if low is not None else "> 0"
                raise ValueError(f"{field} must be a finite number {bound}, got {v!r}")
        minimum = self.min_partition_sm
        if minimum is not None and (
            minimum <= 0 or minimum % self.sms_per_tpc or minimum > self.n_sm
        ):
            raise ValueError(
                f"min_partition_sm={minimum} must be a positive multiple of sms_per_tpc="
                f"{self.sms_per_tpc} no larger than n_sm={self.n_sm}"
            )
        grid = np.arange(self.n_sm + 1, dtype=np.float64)
        xs = np.concatenate([[0.0], counts.astype(np.float64)])
        flops_at = np.interp(grid, xs, np.concatenate([[0.0], flops]))
        bw_at = np.interp(grid, xs, np.concatenate([[0.0], bw]))
        flops_at.setflags(write=False)
        bw_at.setflags(write=False)
        object.__setattr__(self, "_flops_at", flops_at)
        object.__setattr__(self, "_bw_at", bw_at)

    # ---- curves -------------------------------------------------------------------------------
    def flops_curve(self, n: Any) -> Any:
        """Achievable FLOP/s on ``n`` SMs (an int or an integer array in ``[0, n_sm]``)."""
        return self._flops_at[self._index(n)]

    def bw_curve(self, n: Any) -> Any:
        """Achievable HBM bytes/s on ``n`` SMs (an int or an integer array in ``[0, n_sm]``)."""
        return self._bw_at[self._index(n)]

    def _index(self, n: Any) -> Any:
        idx = np.asarray(n)
        if idx.dtype.kind not in "iu":
            if not np.all(idx == np.round(idx)):
                raise ValueError(f"SM counts must be integers, got {n!r}")
            idx = idx.astype(np.int64)
        if np.any(idx < 0) or np.any(idx > self.n_sm):
            raise ValueError(f"SM counts must lie in [0, {self.n_sm}], got {n!r}")
        return idx

    @property
    def granularity_sm(self) -> int:
        """The smallest partition step: one TPC, or the backend's minimum when that is larger."""
        return max(self.sms_per_tpc, self.min_partition_sm or 0)

    @property
    def peak_flops(self) -> float:
        return float(self._flops_at[-1])

    @property
    def peak_bw(self) -> float:
        return float(self._bw_at[-1])

    # ---- constructors -------------------------------------------------------------------------
    @classmethod
    def assumed(
        cls,
        name: str,
        *,
        n_sm: int,
        sms_per_tpc: int,
        peak_flops: float,
        peak_bw: float,
        bw_saturation: float = 0.35,
        compute_efficiency: float = COMPUTE_EFFICIENCY,
        bandwidth_efficiency: float = BANDWIDTH_EFFICIENCY,
        **kwargs: Any,
    ) -> HardwareProfile:
        """The paper's premise as curves: Π linear in n up to the (achievable) peak; B linear until it
        saturates at ``bw_saturation * n_sm`` SMs, flat after. Tabulated at every TPC."""
        if not 0 < bw_saturation <= 1:
            raise ValueError(f"bw_saturation must lie in (0, 1], got {bw_saturation}")
        for label, eff in (
            ("compute_efficiency", compute_efficiency),
            ("bandwidth_efficiency", bandwidth_efficiency),
        ):
            if not 0 < eff <= 1:
                raise ValueError(f"{label} must lie in (0, 1], got {eff}")
        if peak_flops <= 0 or peak_bw <= 0:
            raise ValueError(f"peaks must be > 0, got {peak_flops} FLOP/s and {peak_bw} B/s")
        counts = np.arange(sms_per_tpc, n_sm + 1, sms_per_tpc)
        flops = peak_flops * compute_efficiency * counts / n_sm
        knee = bw_saturation * n_sm
        bw = peak_bw * bandwidth_efficiency * np.minimum(1.0, counts / knee)
        return cls(
            name=name,
            n_sm=n_sm,
            sms_per_tpc=sms_per_tpc,
            sm_counts=tuple(int(c) for c in counts),
            flops=tuple(float(f) for f in flops),
            bandwidth=tuple(float(b) for b in bw),
            **kwargs,
        )

    @classmethod
    def h100_sxm_spec(cls, bw_saturation: float = 0.35, **kwargs: Any) -> HardwareProfile:
        """H100 SXM5 80 GB: 132 SMs in 66 TPCs, 989 TFLOP/s dense bf16, 3.35 TB/s (spec sheet);
        curve shapes assumed (see :meth:`assumed`)."""
        kwargs.setdefault("memory_bytes", 80e9)
        return cls.assumed(
            "H100-SXM",
            n_sm=132,
            sms_per_tpc=2,
            peak_flops=H100_SXM_FLOPS,
            peak_bw=H100_SXM_BW,
            bw_saturation=bw_saturation,
            **kwargs,
        )

    @classmethod
    def h200_spec(cls, bw_saturation: float = 0.35, **kwargs: Any) -> HardwareProfile:
        """H200 141 GB: the H100's 132 SMs and compute, 4.8 TB/s HBM3e (spec sheet)."""
        kwargs.setdefault("memory_bytes", 141e9)
        return cls.assumed(
            "H200",
            n_sm=132,
            sms_per_tpc=2,
            peak_flops=H100_SXM_FLOPS,
            peak_bw=H200_BW,
            bw_saturation=bw_saturation,
            **kwargs,
        )

    @classmethod
    def from_measurements(
        cls,
        table: Mapping[str, Sequence[float]] | Sequence[Sequence[float]],
        *,
        n_sm: int,
        sms_per_tpc: int = 2,
        name: str = "measured",
        **kwargs: Any,
    ) -> HardwareProfile:
        """A profile from measured points: ``{"n_sm": [...], "flops": [...], "bandwidth": [...]}``
        or rows ``(n_sm, flops, bandwidth)``. Curves must be positive and non-decreasing."""
        if isinstance(table, Mapping):
            missing = {"n_sm", "flops", "bandwidth"} - set(table)
            if missing:
                raise ValueError(f"measurement table lacks columns {sorted(missing)}")
            counts, flops, bw = table["n_sm"], table["flops"], table["bandwidth"]
        else:
            rows = [tuple(r) for r in table]
            if not rows or any(len(r) != 3 for r in rows):
                raise ValueError(
                    "measurement rows must be non-empty (n_sm, flops, bandwidth) triples"
                )
            counts, flops, bw = (list(c) for c in zip(*rows, strict=True))
        if any(float(c) != int(c) for c in counts):
            raise ValueError(f"measured SM counts must be integers, got {list(counts)}")
        if int(counts[-1]) != n_sm:
            # Beyond the last point the curves would be held flat: a silent extrapolation.
            raise ValueError(
                f"the last measured SM count must be n_sm={n_sm} (all SMs), got {int(counts[-1])}"
            )
        return cls(
            name=name,
            n_sm=n_sm,
            sms_per_tpc=sms_per_tpc,
            sm_counts=tuple(int(c) for c in counts),
            flops=tuple(float(f) for f in flops),
            bandwidth=tuple(float(b) for b in bw),
            **kwargs,
        )

    def with_infinite_speed(self) -> HardwareProfile:
        """The same SM layout with practically unbounded curves: every iteration takes ~0 s."""
        return dataclasses.replace(
            self,
            name=f"{self.name}-infinite",
            flops=tuple(1e300 for _ in self.flops),
            bandwidth=tuple(1e300 for _ in self.bandwidth),
            link_bw=1e300,
            launch_overhead_s=0.0,
        )
