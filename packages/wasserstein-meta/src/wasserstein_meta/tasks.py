"""Task distributions: the wind law that draws one wind speed per task (train and test laws)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np


@dataclasses.dataclass(frozen=True)
class BetaWind:
    """Wind speed ``w = low + (high − low) · Beta(a, b)`` along inertial x.

    The base code trains PFAR on ``BetaWind(0, 6, 5, 9)`` and tests on ``BetaWind(0, 9, 5, 7)``
    (the train → test shift); PVTOL on ``(0, 3, 5, 9)`` → ``(0, 10, 5, 7)``.
    """

    low: float = 0.0
    high: float = 6.0
    a: float = 5.0
    b: float = 9.0

    def __post_init__(self) -> None:
        for name in ("low", "high", "a", "b"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"{name} must be finite, got {getattr(self, name)}")
        if not (self.a > 0 and self.b > 0):
            raise ValueError(f"Beta shape parameters must be positive, got a={self.a}, b={self.b}")
        if not self.low < self.high:
            raise ValueError(f"need low < high, got low={self.low}, high={self.high}")

    @property
    def mean(self) -> float:
        return self.low + (self.high - self.low) * self.a / (self.a + self.b)

    def sample(self, n: int, seed: int | np.random.Generator = 0) -> np.ndarray:
        """``n`` wind speeds."""
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        return self.low + (self.high - self.low) * rng.beta(self.a, self.b, size=n)


@dataclasses.dataclass(frozen=True)
class MixtureWind:
    """A mixture of wind laws (``weights`` sum to one): a multimodal task distribution."""

    components: tuple[BetaWind, ...]
    weights: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.components) != len(self.weights) or not self.components:
            raise ValueError("need as many weights as components, and at least one")
        if any(not w > 0 for w in self.weights) or abs(sum(self.weights) - 1) > 1e-9:
            raise ValueError(f"weights must be positive and sum to one, got {self.weights}")

    @property
    def mean(self) -> float:
        return sum(w * c.mean for w, c in zip(self.weights, self.components, strict=True))

    def sample(self, n: int, seed: int | np.random.Generator = 0) -> np.ndarray:
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        which = rng.choice(len(self.components), size=n, p=np.asarray(self.weights))
        draws = np.stack([c.sample(n, rng) for c in self.components])
        return draws[which, np.arange(n)]

    def sample_stratified(
        self, n: int, seed: int | np.random.Generator = 0, order: list[int] | None = None
    ) -> np.ndarray:
        """``n`` wind speeds, the components dealt round-robin along ``order`` (default
        ``0..n−1``) from a random first component: any ``k`` consecutive positions of ``order``
        cover ``min(k, C)`` components. Put the indices meta-training keeps first and every
        component gets a training task once they number at least ``C``. Equal weights only (the
        deal is balanced, not proportional)."""
        if len(set(self.weights)) != 1:
            raise ValueError(f"stratified sampling needs equal weights, got {self.weights}")
        order = list(range(n)) if order is None else list(order)
        if sorted(order) != list(range(n)):
            raise ValueError(f"order must be a permutation of 0..{n - 1}, got {order}")
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        C = len(self.components)
        start = int(rng.integers(C))
        which = np.empty(n, dtype=int)
        which[order] = (start + np.arange(n)) % C
        draws = np.stack([c.sample(n, rng) for c in self.components])
        return draws[which, np.arange(n)]
