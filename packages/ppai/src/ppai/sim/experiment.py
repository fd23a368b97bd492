"""Running R independent adaptive experiments at once."""

from __future__ import annotations

import dataclasses

import numpy as np

from ppai.problems import Array
from ppai.sim.environments import LinearContextualBandit
from ppai.sim.policies import Policy
from ppai.sim.predictors import NoisyOracle


@dataclasses.dataclass(frozen=True)
class Experiments:
    """R experiments: labeled rounds ``X (R,T,p)``, ``A (R,T)``, ``Y (R,T)``, logged propensity
    matrices ``propensity (R,T,K)``, predictions ``pred (R,T,K)``; unlabeled pools ``X_u (R,N,p)``,
    ``pred_u (R,N,K)``."""

    X: Array
    A: np.ndarray
    Y: Array
    propensity: Array
    pred: Array
    X_u: Array
    pred_u: Array

    def rep(self, r: int) -> dict[str, Array]:
        """Replication ``r`` as keyword arguments of :meth:`ppai.PPAI.fit`."""
        return {
            "X": self.X[r],
            "A": self.A[r],
            "Y": self.Y[r],
            "propensity": self.propensity[r],
            "pred_labeled": self.pred[r],
            "X_unlabeled": self.X_u[r],
            "pred_unlabeled": self.pred_u[r],
        }


def simulate(
    env: LinearContextualBandit,
    policy: Policy,
    predictor: NoisyOracle,
    *,
    T: int,
    N: int,
    reps: int,
    rng: np.random.Generator,
) -> Experiments:
    """Run ``reps`` experiments of ``T`` rounds under ``policy`` and draw pools of ``N`` contexts."""
    if T < 1 or N < 0 or reps < 1:
        raise ValueError(f"need T >= 1, N >= 0, reps >= 1; got T={T}, N={N}, reps={reps}")
    K = env.n_arms
    X = env.contexts(rng, (reps, T))
    Y_all = env.outcomes(rng, X)
    policy.reset(reps, K, env.dim, rng)
    A = np.empty((reps, T), dtype=np.int64)
    P = np.empty((reps, T, K))
    r = np.arange(reps)
    for t in range(T):
        probs = policy.probs(X[:, t])
        # Inverse-CDF draw of one arm per replication from its probabilities.
        a = (rng.random((reps, 1)) > np.cumsum(probs, axis=1)).sum(1).clip(max=K - 1)
        A[:, t], P[:, t] = a, probs
        policy.update(X[:, t], a, Y_all[r, t, a])
    Y = np.take_along_axis(Y_all, A[..., None], axis=2)[..., 0]
    X_u = env.contexts(rng, (reps, N))
    return Experiments(X, A, Y, P, predictor.predict(X, rng), X_u, predictor.predict(X_u, rng))
