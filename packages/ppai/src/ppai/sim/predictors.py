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

    def predict(self, X: Array, rng: np.random.Generator) -> Array:
        """Predictions for every arm, shape ``(..., K)``."""
        m = self.env.mean_reward(X)
        f = self.bias + self.signal * m + self.noise_sd * rng.standard_normal(m.shape)
        return np.clip(f, 0.0, 1.0) if self.env.binary else f
