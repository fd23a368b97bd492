"""Contextual bandit environments: contexts X ~ N(0, I_p), potential outcomes Y(a) for every arm."""

from __future__ import annotations

import dataclasses

import numpy as np

from ppai.problems import Array


def _expit(z: Array) -> Array:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


@dataclasses.dataclass(frozen=True)
class LinearContextualBandit:
    """``Y(a) = Xᵀβ_a + c_a + ε`` with ``ε ~ N(0, noise_sd²)``, or ``Y(a) ~ Bernoulli(σ(Xᵀβ_a + c_a))``.

    ``beta`` is ``(K, p)``, ``intercept`` ``(K,)``. With Gaussian contexts the arm means of the linear
    variant are exactly the intercepts.
    """

    beta: Array
    intercept: Array
    noise_sd: float = 0.5
    binary: bool = False

    def __post_init__(self) -> None:
        beta = np.atleast_2d(np.asarray(self.beta, dtype=float))
        intercept = np.asarray(self.intercept, dtype=float)
        if intercept.shape != (beta.shape[0],):
            raise ValueError(
                f"intercept must have one entry per arm ({beta.shape[0]}), got {intercept.shape}"
            )
        if self.noise_sd < 0:
            raise ValueError(f"noise_sd must be >= 0, got {self.noise_sd!r}")
        object.__setattr__(self, "beta", beta)
        object.__setattr__(self, "intercept", intercept)

    @classmethod
    def default(cls, binary: bool = False) -> LinearContextualBandit:
        """The spec's 2-arm, 3-covariate environment (E[Y(1)] = 0.3 in the linear variant)."""
        beta = np.array([[0.5, -0.3, 0.2], [-0.4, 0.6, 0.3]])
        return cls(beta, np.array([0.0, 0.3]), noise_sd=0.5, binary=binary)

    @property
    def n_arms(self) -> int:
        return int(self.beta.shape[0])

    @property
    def dim(self) -> int:
        return int(self.beta.shape[1])

    def contexts(self, rng: np.random.Generator, shape: tuple[int, ...]) -> Array:
        """Contexts of shape ``(*shape, p)``."""
        return rng.standard_normal((*shape, self.dim))

    def mean_reward(self, X: Array) -> Array:
        """``E[Y(a) | X]`` for every arm, shape ``(..., K)``."""
        z = X @ self.beta.T + self.intercept
        return _expit(z) if self.binary else z

    def outcomes(self, rng: np.random.Generator, X: Array) -> Array:
        """Potential outcomes ``Y(a)`` for every arm, shape ``(..., K)``."""
        m = self.mean_reward(X)
        if self.binary:
            return (rng.random(m.shape) < m).astype(float)
        return m + self.noise_sd * rng.standard_normal(m.shape)

    def arm_means(self, n_mc: int = 1_000_000, seed: int = 12345) -> Array:
        """``E[Y(a)]``: the intercepts (linear), or a Monte-Carlo average of σ (binary)."""
        if not self.binary:
            return self.intercept.copy()
        X = self.contexts(np.random.default_rng(seed), (n_mc,))
        return self.mean_reward(X).mean(0)
