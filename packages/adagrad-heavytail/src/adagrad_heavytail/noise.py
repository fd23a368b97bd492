"""Symmetric, mean-zero noise laws with heavy tails, with analytic p-th absolute moments.

Each law has ``sample(shape, rng)``, ``pth_moment(p)`` (E|ξ|^p in closed form, ``inf`` from the tail
index on) and ``tail_index`` (sup of the p with E|ξ|^p finite; ``inf`` for light tails).

``rng`` is a ``numpy.random.Generator`` (numpy array back) or a ``torch.Generator`` (torch tensor
back, float64 unless ``dtype`` says otherwise). The torch path draws one 63-bit seed from the torch
generator and samples with numpy: one implementation of each sampler, reproducible from either kind
of generator.

The paper needs p > 1 (a finite mean, so that E[ξ] = 0 means something): laws with tail index ≤ 1
are refused unless ``allow_infinite_mean=True`` (for the lower-bound and stall experiments).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

Shape = int | tuple[int, ...]


def _numpy_rng(rng: Any) -> tuple[np.random.Generator, Any]:
    """A numpy Generator for ``rng``, and the torch generator (or None) the result goes back to."""
    if isinstance(rng, np.random.Generator):
        return rng, None
    import torch

    if isinstance(rng, torch.Generator):
        seed = int(torch.randint(0, 2**63 - 1, (), generator=rng, dtype=torch.int64))
        return np.random.default_rng(seed), rng
    raise TypeError(
        f"rng must be a numpy.random.Generator or a torch.Generator, got {type(rng).__name__}"
    )


def _finish(x: np.ndarray, torch_rng: Any, dtype: Any) -> Any:
    if torch_rng is None:
        return x if dtype is None else x.astype(dtype)
    import torch

    return torch.from_numpy(x).to(dtype or torch.float64)


def _check_mean(name: str, index: float, allow_infinite_mean: bool) -> None:
    if index <= 1 and not allow_infinite_mean:
        raise ValueError(
            f"{name} = {index} has no finite mean; the paper needs p > 1: finite mean "
            "(pass allow_infinite_mean=True to sample it anyway)"
        )


def _check_positive(name: str, value: float) -> None:
    if not (isinstance(value, numbers.Real) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def _check_p(p: float) -> None:
    if not p > 0:
        raise ValueError(f"p must be > 0, got {p!r}")


class Noise:
    """Interface of every law below."""

    @property
    def tail_index(self) -> float:
        """sup of the p with E|ξ|^p finite (``inf`` for light tails)."""
        raise NotImplementedError

    def _draw(self, shape: Shape, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def sample(self, shape: Shape, rng: Any, dtype: Any = None) -> Any:
        """``shape`` i.i.d. draws from numpy or torch generator ``rng`` (see the module doc)."""
        gen, torch_rng = _numpy_rng(rng)
        return _finish(self._draw(shape, gen), torch_rng, dtype)

    def pth_moment(self, p: float) -> float:
        """E|ξ|^p; ``inf`` when p ≥ the tail index."""
        raise NotImplementedError


@dataclass(frozen=True)
class Gaussian(Noise):
    """N(0, scale²); every moment is finite (the p = 2 reference)."""

    scale: float = 1.0

    def __post_init__(self) -> None:
        _check_positive("scale", self.scale)

    @property
    def tail_index(self) -> float:
        return math.inf

    def _draw(self, shape: Shape, rng: np.random.Generator) -> np.ndarray:
        return rng.normal(0.0, self.scale, shape)

    def pth_moment(self, p: float) -> float:
        _check_p(p)
        return self.scale**p * 2 ** (p / 2) * math.gamma((p + 1) / 2) / math.sqrt(math.pi)


@dataclass(frozen=True)
class StudentT(Noise):
    """scale × Student-t with ``df`` degrees of freedom: E|ξ|^p < ∞ exactly for p < df."""

    df: float
    scale: float = 1.0
    allow_infinite_mean: bool = False

    def __post_init__(self) -> None:
        _check_positive("df", self.df)
        _check_positive("scale", self.scale)
        _check_mean("StudentT df", self.df, self.allow_infinite_mean)

    @property
    def tail_index(self) -> float:
        return float(self.df)

    def _draw(self, shape: Shape, rng: np.random.Generator) -> np.ndarray:
        return self.scale * rng.standard_t(self.df, shape)

    def pth_moment(self, p: float) -> float:
        _check_p(p)
        if p >= self.df:
            return math.inf
        nu = self.df
        log_m = (
            (p / 2) * math.log(nu)
            + math.lgamma((p + 1) / 2)
            + math.lgamma((nu - p) / 2)
            - 0.5 * math.log(math.pi)
            - math.lgamma(nu / 2)
        )
        return self.scale**p * math.exp(log_m)


@dataclass(frozen=True)
class SymmetricStable(Noise):
    """Symmetric α-stable law S(α, β=0, scale, 0): characteristic function ``exp(-|scale·t|^α)``.

    For β = 0 the S0 and S1 parameterisations coincide, and this is scipy's
    ``levy_stable(alpha, 0, loc=0, scale=scale)``. α = 2 is N(0, 2·scale²) (not N(0, scale²)); α = 1
    is Cauchy(0, scale). E|ξ|^p < ∞ exactly for p < α (α < 2).

    Sampled by Chambers–Mallows–Stuck: with V ~ U(-π/2, π/2) and W ~ Exp(1),
    ``ξ = scale · sin(αV)/cos(V)^{1/α} · (cos((1-α)V)/W)^{(1-α)/α}``.
    """

    alpha: float
    scale: float = 1.0
    beta: float = 0.0
    allow_infinite_mean: bool = False

    def __post_init__(self) -> None:
        if not (isinstance(self.alpha, numbers.Real) and 0 < self.alpha <= 2):
            raise ValueError(f"stable alpha must lie in (0, 2], got {self.alpha!r}")
        if self.beta != 0:
            raise ValueError(
                f"only the symmetric stable law (beta = 0) is mean-zero noise for the theory, "
                f"got beta = {self.beta!r}"
            )
        _check_positive("scale", self.scale)
        _check_mean("SymmetricStable alpha", self.alpha, self.allow_infinite_mean)

    @property
    def tail_index(self) -> float:
        return math.inf if self.alpha == 2 else float(self.alpha)

    def _draw(self, shape: Shape, rng: np.random.Generator) -> np.ndarray:
        return self.scale * cms_symmetric(self.alpha, shape, rng)

    def pth_moment(self, p: float) -> float:
        _check_p(p)
        a = self.alpha
        if a == 2:
            return Gaussian(math.sqrt(2) * self.scale).pth_moment(p)
        if p >= a:
            return math.inf
        # E|ξ|^p = scale^p 2^p Γ((1+p)/2) Γ(1-p/α) / (Γ(1-p/2) √π)   (0 < p < α < 2)
        log_m = (
            p * math.log(2)
            + math.lgamma((1 + p) / 2)
            + math.lgamma(1 - p / a)
            - math.lgamma(1 - p / 2)
            - 0.5 * math.log(math.pi)
        )
        return self.scale**p * math.exp(log_m)


def cms_symmetric(alpha: float, shape: Shape, rng: np.random.Generator) -> np.ndarray:
    """Standard symmetric α-stable draws (scale 1) by Chambers–Mallows–Stuck, vectorised."""
    v = rng.uniform(-math.pi / 2, math.pi / 2, shape)
    if alpha == 1:
        return np.tan(v)
    w = rng.standard_exponential(shape)
    cos_v = np.cos(v)
    return (
        np.sin(alpha * v)
        / cos_v ** (1 / alpha)
        * (np.cos((1 - alpha) * v) / w) ** ((1 - alpha) / alpha)
    )


@dataclass(frozen=True)
class SymmetricPareto(Noise):
    """±X with X Pareto(α, xm): P(|ξ| > x) = (xm/x)^α for x ≥ xm; E|ξ|^p = α xm^p/(α-p), p < α."""

    alpha: float
    xm: float = 1.0
    allow_infinite_mean: bool = False

    def __post_init__(self) -> None:
        _check_positive("alpha", self.alpha)
        _check_positive("xm", self.xm)
        _check_mean("SymmetricPareto alpha", self.alpha, self.allow_infinite_mean)

    @property
    def tail_index(self) -> float:
        return float(self.alpha)

    def _draw(self, shape: Shape, rng: np.random.Generator) -> np.ndarray:
        # inverse CDF: |ξ| = xm U^{-1/α}
        magnitude = self.xm * rng.uniform(0.0, 1.0, shape) ** (-1 / self.alpha)
        return np.where(rng.uniform(0.0, 1.0, shape) < 0.5, -magnitude, magnitude)

    def pth_moment(self, p: float) -> float:
        _check_p(p)
        if p >= self.alpha:
            return math.inf
        return self.alpha * self.xm**p / (self.alpha - p)


@dataclass(frozen=True)
class SpikeNoise(Noise):
    """±M with probability q/2 each, 0 otherwise: E|ξ|^p = q M^p (bounded, so every moment finite).

    The lower bound's oracle: rare spikes inflate AdaGrad's accumulator for good. With q M^p = σ^p
    fixed, a smaller q is a heavier tail at the same p-th moment (:func:`spike_for`).
    """

    M: float
    q: float

    def __post_init__(self) -> None:
        _check_positive("M", self.M)
        if not (isinstance(self.q, numbers.Real) and 0 < self.q <= 1):
            raise ValueError(f"spike probability q must lie in (0, 1], got {self.q!r}")

    @property
    def tail_index(self) -> float:
        return math.inf

    def _draw(self, shape: Shape, rng: np.random.Generator) -> np.ndarray:
        u = rng.uniform(0.0, 1.0, shape)
        return np.where(u < self.q / 2, -self.M, np.where(u > 1 - self.q / 2, self.M, 0.0))

    def pth_moment(self, p: float) -> float:
        _check_p(p)
        return self.q * self.M**p


def spike_for(sigma: float, p: float, q: float) -> SpikeNoise:
    """The spike law with E|ξ|^p = σ^p and spike probability q: ``M = σ q^{-1/p}``."""
    _check_positive("sigma", sigma)
    _check_p(p)
    return SpikeNoise(M=sigma * q ** (-1 / p), q=q)


def to_sigma(noise: Noise, p: float) -> float:
    """σ = (E|ξ|^p)^{1/p}, the p-th moment scale the rates are stated in (``inf`` if infinite)."""
    moment = noise.pth_moment(p)
    return math.inf if math.isinf(moment) else moment ** (1 / p)


__all__ = [
    "Gaussian",
    "Noise",
    "SpikeNoise",
    "StudentT",
    "SymmetricPareto",
    "SymmetricStable",
    "cms_symmetric",
    "spike_for",
    "to_sigma",
]
