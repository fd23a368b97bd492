"""The baselines of the paper on :class:`~adascale.base.Detector`'s interface.

Energy, SCALE, LTS, ASH-P/B/S, ReAct and OptFS. Percentiles follow OpenOOD (``[0, 100)``, the share
of activations *not* kept); every score is higher for in-distribution inputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar, Literal

import torch
from torch import Tensor, nn

from adascale import functional as F
from adascale.base import Data, Detector, NotFittedError
from adascale.distributed import gather_rows


class Energy(Detector):
    """Energy score ``logsumexp(W z + b)`` (Liu et al. 2020)."""

    def score_features(self, z: Tensor) -> Tensor:
        return F.energy(self.head(z))


class _Percentile(Detector):
    def __init__(
        self, backbone: Callable[[Tensor], Tensor], head: nn.Module, *, percentile: float
    ) -> None:
        super().__init__(backbone, head)
        if not 0 <= percentile < 100:
            raise ValueError(f"percentile must lie in [0, 100), got {percentile!r}")
        self.percentile = percentile


class SCALE(_Percentile):
    """SCALE (Xu et al. ICLR 2024): energy of ``W (z exp(r)) + b``, static percentile."""

    def __init__(
        self, backbone: Callable[[Tensor], Tensor], head: nn.Module, *, percentile: float = 85.0
    ) -> None:
        super().__init__(backbone, head, percentile=percentile)

    def score_features(self, z: Tensor) -> Tensor:
        return F.energy(self.head(F.scale(z, self.percentile)))


class LTS(_Percentile):
    """Logit scaling: energy of ``(W z + b) r**2`` (percentile 95 = pytorch-ood's ``p=0.05``)."""

    def __init__(
        self, backbone: Callable[[Tensor], Tensor], head: nn.Module, *, percentile: float = 95.0
    ) -> None:
        super().__init__(backbone, head, percentile=percentile)

    def score_features(self, z: Tensor) -> Tensor:
        factor = F.lts_factor(z, self.percentile).to(z.dtype)
        return F.energy(self.head(z) * factor[:, None])


class ASH(_Percentile):
    """ASH (Djurisic et al. ICLR 2023), ``variant`` ``"P"`` (prune), ``"B"`` (binarise), ``"S"``."""

    _shapes: ClassVar[dict[str, Callable[[Tensor, float], Tensor]]] = {
        "P": F.ash_p,
        "B": F.ash_b,
        "S": F.ash_s,
    }

    def __init__(
        self,
        backbone: Callable[[Tensor], Tensor],
        head: nn.Module,
        *,
        variant: Literal["P", "B", "S"] = "S",
        percentile: float = 90.0,
    ) -> None:
        super().__init__(backbone, head, percentile=percentile)
        if variant not in self._shapes:
            raise ValueError(f"ASH variant must be 'P', 'B' or 'S', got {variant!r}")
        self.variant = variant

    def score_features(self, z: Tensor) -> Tensor:
        return F.energy(self.head(self._shapes[self.variant](z, self.percentile)))


class ReAct(_Percentile):
    """ReAct (Sun et al. 2021): clip at the ``percentile`` of all ID-fit activations, energy.

    The fit set's activations are kept, so changing ``percentile`` needs no refit.
    """

    def __init__(
        self,
        backbone: Callable[[Tensor], Tensor],
        head: nn.Module,
        *,
        percentile: float = 90.0,
        n_fit: int | None = 5000,
    ) -> None:
        super().__init__(backbone, head, percentile=percentile)
        self.n_fit = n_fit
        self.fit_activations_: Tensor | None = None

    def fit(self, data: Data) -> ReAct:
        (z,) = self.extract_all(data, self.n_fit)
        return self.fit_features(z)

    def fit_features(self, z: Tensor) -> ReAct:
        F._check_features(z)
        self.fit_activations_ = gather_rows(z.detach()).flatten().sort().values
        return self

    @property
    def threshold(self) -> float:
        if self.fit_activations_ is None:
            raise NotFittedError("ReAct requires fit() on ID data first")
        flat = self.fit_activations_
        # numpy's linear-interpolated percentile on the sorted activations
        pos = (flat.numel() - 1) * self.percentile / 100.0
        lo, frac = math.floor(pos), pos - math.floor(pos)
        hi = min(lo + 1, flat.numel() - 1)
        return float(flat[lo] + frac * (flat[hi] - flat[lo]))

    def score_features(self, z: Tensor) -> Tensor:
        return F.energy(self.head(F.react(z, self.threshold)))


class OptFS(Detector):
    """OptFS (Zhao et al. ICLR 2024): ID-only optimal piecewise-constant feature shaping.

    Fit: intervals of equal width over the ``[0.1 %, 99.9 %]`` quantiles of all fit activations,
    ``theta ∝`` each interval's mean share of the max logit. Score: ``w_y^ . shaped(z)``
    (``score="vanilla"``, the official default) or the energy of the shaped logits.
    """

    def __init__(
        self,
        backbone: Callable[[Tensor], Tensor],
        head: nn.Module,
        *,
        bins: int = 100,
        score: Literal["vanilla", "energy"] = "vanilla",
        n_fit: int | None = 5000,
    ) -> None:
        super().__init__(backbone, head)
        if bins < 1:
            raise ValueError(f"bins must be >= 1, got {bins}")
        if score not in ("vanilla", "energy"):
            raise ValueError(f"score must be 'vanilla' or 'energy', got {score!r}")
        self.bins, self.score_kind, self.n_fit = bins, score, n_fit
        self.theta_: Tensor | None = None
        self.left_: float = 0.0
        self.width_: float = 1.0

    def fit(self, data: Data) -> OptFS:
        (z,) = self.extract_all(data, self.n_fit)
        return self.fit_features(z)

    def fit_features(self, z: Tensor) -> OptFS:
        F._check_features(z)
        z = gather_rows(z.detach())
        with torch.no_grad():
            pred = self.head(z).argmax(dim=1)
        flat = z.flatten().double()
        lo, hi = (
            float(v) for v in torch.quantile(_subsample(flat), flat.new_tensor([1e-3, 1 - 1e-3]))
        )
        if hi <= lo:
            raise ValueError(f"OptFS: fit activations span no range ([{lo}, {hi}])")
        self.left_, self.width_ = lo, (hi - lo) / self.bins
        w = self.head.weight.detach()[pred]
        self.theta_ = F.optfs_theta(z, w, self.left_, self.width_, self.bins)
        return self

    def shaped(self, z: Tensor) -> Tensor:
        if self.theta_ is None:
            raise NotFittedError("OptFS requires fit() on ID data first")
        return F.optfs_shape(z, self.left_, self.width_, self.theta_)

    def score_features(self, z: Tensor) -> Tensor:
        shaped = self.shaped(z)
        if self.score_kind == "energy":
            return F.energy(self.head(shaped))
        pred = self.head(z).argmax(dim=1)
        return (self.head.weight[pred] * shaped).sum(dim=1)


def _subsample(flat: Tensor, limit: int = 16_000_000) -> Tensor:
    # torch.quantile refuses more than 2**24 elements; a strided subsample keeps the tails.
    return flat if flat.numel() <= limit else flat[:: math.ceil(flat.numel() / limit)]
