"""Prediction models of controllable quality, standing in for a pretrained AI model."""

from __future__ import annotations

import dataclasses

import numpy as np

from ppai.problems import Array
from ppai.sim.environments import LinearContextualBandit


@dataclasses.dataclass(frozen=True)
class NoisyOracle:
    """``f(x, a) = bias + signal · E[Y(a) | x] + noise_sd · ξ`` with fresh ``ξ ~ N(0, 1)`` per call.

    ``signal=1, noise_sd=0`` is a perfect (conditional-mean) model; ``signal=0`` gives predictions
    independent of the outcomes (useless). For a binary environment the prediction is clipped to
    [0, 1], as a predicted probability.
    """

    env: LinearContextualBandit
    signal: float = 1.0
    noise_sd: float = 0.0
    bias: float = 0.0

    @classmethod
    def informative(cls, env: LinearContextualBandit) -> NoisyOracle:
        """The spec's informative model: bias 0.2, noise 0.3."""
        return cls(env, signal=1.0, noise_sd=0.3, bias=0.2)

    @classmethod
    def useless(cls, env: LinearContextualBandit) -> NoisyOracle:
        """Pure noise, independent of the outcomes."""
        return cls(env, signal=0.0, noise_sd=1.0, bias=0.0)

    @classmethod
    def with_correlation(
        cls, env: LinearContextualBandit, corr: float, bias: float = 0.0, arm: int = 1
    ) -> NoisyOracle:
        """Predictions correlated ``corr`` with arm ``arm``'s conditional mean ``m = E[Y(arm) | x]``,
        shifted by ``bias`` (the spec's correlation × bias grid, §5).

        One design across the grid: ``f = E[m] + bias + corr · (m − E[m]) + √(1 − corr²) · sd(m) · ξ``,
        so ``mean(f) − mean(m) = bias`` and ``Var f = Var m`` at every correlation, ``corr = 0``
        included (pure noise of the conditional mean's scale). The correlation with the outcome
        itself is lower by the factor ``sd(E[Y|x]) / sd(Y)``.
        """
        if not 0.0 <= corr <= 1.0:
            raise ValueError(f"corr must lie in [0, 1], got {corr!r}")
        if env.binary:  # no closed form for the moments of σ(xᵀβ + c): Monte Carlo, fixed seed
            m = env.mean_reward(env.contexts(np.random.default_rng(0), (200_000,)))[:, arm]
            mean, sd = float(m.mean()), float(m.std())
        else:  # standard normal contexts: E[xᵀβ_a + c_a] = c_a, Var(xᵀβ_a) = |β_a|²
            mean, sd = float(env.intercept[arm]), float(np.linalg.norm(env.beta[arm]))
        return cls(
            env,
            signal=corr,
            noise_sd=sd * float(np.sqrt(1.0 - corr**2)),
            bias=bias + (1.0 - corr) * mean,
        )

    def predict(self, X: Array, rng: np.random.Generator) -> Array:
        """Predictions for every arm, shape ``(..., K)``."""
        m = self.env.mean_reward(X)
        f = self.bias + self.signal * m + self.noise_sd * rng.standard_normal(m.shape)
        return np.clip(f, 0.0, 1.0) if self.env.binary else f
