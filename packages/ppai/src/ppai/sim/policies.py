"""Logging policies for batched bandit experiments; every policy reports the propensities it used.

Each policy keeps, for every replication and arm, ridge-regression statistics of the outcome on
``[1, x]`` (on ``[1]`` with ``contextual=False``: a multi-armed bandit that ignores the context) and refits them every ``batch`` rounds (after ``warmup`` uniform rounds), as batched
deployments do. ``probs(x)`` returns the ``(R, K)`` action probabilities for the round's contexts;
the experiment draws the arm from them, so the logged propensities are exact.

Clipping (Thompson sampling, UCB) mixes with the uniform policy, ``p = floor + (1 − K·floor) p_raw``,
so every arm keeps probability at least ``floor`` — the propensity floor the inference needs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import ndtr

from ppai.problems import Array


class Policy:
    """Shared state: per-replication, per-arm ridge fits of the outcome on ``[1, x]``."""

    def __init__(
        self, batch: int = 50, warmup: int = 50, ridge: float = 1.0, contextual: bool = True
    ) -> None:
        if batch < 1 or warmup < 0 or ridge <= 0:
            raise ValueError(
                f"need batch >= 1, warmup >= 0, ridge > 0; got {batch}, {warmup}, {ridge}"
            )
        self.batch, self.warmup, self.ridge = batch, warmup, ridge
        self.contextual = contextual

    def reset(self, R: int, K: int, p: int, rng: np.random.Generator) -> None:
        q = p + 1 if self.contextual else 1
        self.K, self.rng, self.t = K, rng, 0
        self.gram = np.broadcast_to(self.ridge * np.eye(q), (R, K, q, q)).copy()
        self.xty = np.zeros((R, K, q))
        self.coef = np.zeros((R, K, q))
        self.cov = np.broadcast_to(np.eye(q) / self.ridge, (R, K, q, q)).copy()
        self.resid = np.ones((R, K))  # running residual variance, for the posterior scale

    def _features(self, X: Array) -> Array:
        # A non-contextual policy (a multi-armed bandit) fits arm means only.
        ones = np.ones((*X.shape[:-1], 1))
        return np.concatenate([ones, X], axis=-1) if self.contextual else ones

    def update(self, X: Array, A: np.ndarray, Y: Array) -> None:
        """Record one round ``(R, p)``, ``(R,)``, ``(R,)``; refit at the end of each batch."""
        z = self._features(X)
        r = np.arange(X.shape[0])
        self.gram[r, A] += z[:, :, None] * z[:, None, :]
        self.xty[r, A] += z * Y[:, None]
        self.t += 1
        if self.t >= self.warmup and self.t % self.batch == 0:
            self.cov = np.linalg.inv(self.gram)
            self.coef = np.einsum("rkij,rkj->rki", self.cov, self.xty)

    def estimates(self, X: Array) -> tuple[Array, Array]:
        """Estimated mean reward ``(R, K)`` and its standard error for contexts ``(R, p)``."""
        z = self._features(X)
        mean = np.einsum("rki,ri->rk", self.coef, z)
        var = np.einsum("ri,rkij,rj->rk", z, self.cov, z)
        return mean, np.sqrt(np.maximum(var, 0.0))

    def probs(self, X: Array) -> Array:
        if self.t < self.warmup:
            return np.full((X.shape[0], self.K), 1.0 / self.K)
        return self._probs(X)

    def _probs(self, X: Array) -> Array:
        raise NotImplementedError


class Uniform(Policy):
    """Uniform random assignment (a non-adaptive A/B test)."""

    def _probs(self, X: Array) -> Array:
        return np.full((X.shape[0], self.K), 1.0 / self.K)


def _greedy(scores: Array, K: int) -> Array:
    return np.eye(K)[np.argmax(scores, axis=1)]


def _mix(p_raw: Array, floor: float, K: int) -> Array:
    if K * floor > 1.0:
        # Above 1/K the mixture weight 1 − K·floor is negative: the preferences would be inverted.
        raise ValueError(f"clip={floor!r} exceeds 1/K = {1.0 / K:.3g}: {K} arms cannot all keep it")
    return floor + (1.0 - K * floor) * p_raw


def _check_floor(floor: float, name: str) -> float:
    if not 0.0 <= floor < 1.0:
        raise ValueError(f"{name} must lie in [0, 1), got {floor!r}")
    return float(floor)


class EpsilonGreedy(Policy):
    """Play the estimated best arm with probability ``1 − ε + ε/K``, every other with ``ε/K``."""

    def __init__(self, epsilon: float = 0.1, **kw: Any) -> None:
        super().__init__(**kw)
        self.epsilon = _check_floor(epsilon, "epsilon")

    def _probs(self, X: Array) -> Array:
        mean, _ = self.estimates(X)
        return _mix(_greedy(mean, self.K), self.epsilon / self.K, self.K)


class UCB(Policy):
    """Clipped linear UCB: the arm with the largest ``mean + c·se``, mixed so every arm has ``floor``."""

    def __init__(self, clip: float = 0.05, c: float = 1.0, **kw: Any) -> None:
        super().__init__(**kw)
        self.clip, self.c = _check_floor(clip, "clip"), float(c)

    def _probs(self, X: Array) -> Array:
        mean, se = self.estimates(X)
        return _mix(_greedy(mean + self.c * se, self.K), self.clip, self.K)


class ThompsonSampling(Policy):
    """Clipped Gaussian Thompson sampling: P(arm a has the largest posterior draw), mixed with ``clip``.

    For two arms the probability is exact, ``Φ((m_a − m_b) / sqrt(s_a² + s_b²))``; for more arms it is
    a Monte-Carlo estimate from ``n_draws`` draws — still the exact probability the arm is drawn with.
    """

    def __init__(
        self, clip: float = 0.05, noise_sd: float = 1.0, n_draws: int = 256, **kw: Any
    ) -> None:
        super().__init__(**kw)
        self.clip, self.noise_sd, self.n_draws = (
            _check_floor(clip, "clip"),
            float(noise_sd),
            int(n_draws),
        )

    def _probs(self, X: Array) -> Array:
        mean, se = self.estimates(X)
        se = self.noise_sd * se
        if self.K == 2:
            p1 = ndtr((mean[:, 1] - mean[:, 0]) / np.sqrt(se[:, 0] ** 2 + se[:, 1] ** 2 + 1e-300))
            p_raw = np.stack([1 - p1, p1], axis=1)
        else:
            draws = mean[:, None, :] + se[:, None, :] * self.rng.standard_normal(
                (X.shape[0], self.n_draws, self.K)
            )
            p_raw = np.eye(self.K)[draws.argmax(-1)].mean(1)
        return _mix(p_raw, self.clip, self.K)
