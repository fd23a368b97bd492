"""The base learner on constructed features: ridge (global) + k-NN in the contrastive space (local).

``fitness_predictions`` is the evolution-phase model (upstream ``RidgeBoosted-LinearRankKNN``,
in-sample, fixed K); ``fit_member`` the final model of each archive member (ridge → a new
contrastive W → k-NN whose K is chosen by leave-one-out). The paper's ablations are the same code
with components switched off (:data:`BASE_LEARNERS`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from contrastive_sr.contrastive import solve_transformation_matrix
from contrastive_sr.linear import Ridge, Scaling, fit_scaling, ridge_cv
from contrastive_sr.neighbors import (
    kneighbors,
    knn_predict,
    loo_predictions_all_k,
    loo_r2_all_k,
)

# The ablation grid of the paper's Table 2, named as there (LR = ridge, CL = contrastive W,
# LOO-KNN = K chosen by leave-one-out at the final fit; KNN alone = fixed K).
BASE_LEARNERS: dict[str, tuple[bool, bool, str]] = {
    "lr": (True, False, "none"),
    "knn": (False, False, "fixed"),
    "loo-knn": (False, False, "loo"),
    "lr+knn": (True, False, "fixed"),
    "lr+loo-knn": (True, False, "loo"),
    "cl+knn": (False, True, "fixed"),
    "cl+loo-knn": (False, True, "loo"),
    "lr+cl+knn": (True, True, "fixed"),
    "lr+cl+loo-knn": (True, True, "loo"),
}


@dataclasses.dataclass(frozen=True)
class LearnerSpec:
    ridge: bool
    contrastive: bool
    knn: str  # "none" | "fixed" | "loo"
    n_neighbors: int  # K of the evolution phase and of "fixed"
    k_max: int  # largest K of the leave-one-out choice
    knn_weights: str  # evolution-phase (and "fixed") weights
    final_knn_weights: str  # weights of the leave-one-out final k-NN
    contrastive_reg: float
    subsample: int
    backend: str = "numpy"


def _global(Phi: np.ndarray, y: np.ndarray, spec: LearnerSpec) -> tuple[Ridge | None, np.ndarray]:
    if not spec.ridge:
        return None, y.copy()
    ridge = ridge_cv(Phi, y)
    return ridge, y - ridge.predict(Phi)


def _metric(Phi: np.ndarray, r: np.ndarray, spec: LearnerSpec, rng: np.random.Generator):
    if not spec.contrastive:
        return np.eye(Phi.shape[1])
    return solve_transformation_matrix(Phi, r, spec.contrastive_reg, spec.subsample, rng)


def fitness_predictions(
    Phi_raw: np.ndarray, y: np.ndarray, spec: LearnerSpec, rng: np.random.Generator
) -> np.ndarray:
    """In-sample training predictions of the evolution-phase model (y standardised).

    As upstream with ``cross_validation=False``: the k-NN predicts its own training rows, the row
    itself included among its K neighbours.
    """
    Phi = fit_scaling(Phi_raw)(Phi_raw)
    _, r = _global(Phi, y, spec)
    pred = y - r  # the ridge part (zero without ridge)
    if spec.knn != "none":
        Z = Phi @ _metric(Phi, r, spec, rng)
        k = min(spec.n_neighbors, Z.shape[0])
        idx = kneighbors(Z, Z, k, backend=spec.backend)  # type: ignore[arg-type]
        pred = pred + knn_predict(r[idx], spec.knn_weights)
    return pred


@dataclasses.dataclass
class Member:
    """One fitted final model: ``ŷ = ridge(Φ) + kNN_K(Φ W)`` on the scaled features Φ."""

    individual: tuple
    scaling: Scaling
    ridge: Ridge | None
    W: np.ndarray
    Z_train: np.ndarray
    r_train: np.ndarray
    k: int  # 0: the k-NN part is the constant mean(r) (or absent)
    weights: str
    constant: float
    backend: str = "numpy"

    def predict_features(self, Phi_raw: np.ndarray) -> np.ndarray:
        Phi = self.scaling(Phi_raw)
        out = self.ridge.predict(Phi) if self.ridge is not None else np.zeros(Phi.shape[0])
        if self.k > 0:
            idx = kneighbors(self.Z_train, Phi @ self.W, self.k, backend=self.backend)  # type: ignore[arg-type]
            out = out + knn_predict(self.r_train[idx], self.weights)
        else:
            out = out + self.constant
        return out


def fit_member(
    individual: tuple,
    Phi_raw: np.ndarray,
    y: np.ndarray,
    spec: LearnerSpec,
    rng: np.random.Generator,
) -> Member:
    """The final model of one archive member (upstream ``train_final_model``)."""
    scaling = fit_scaling(Phi_raw)
    Phi = scaling(Phi_raw)
    ridge, r = _global(Phi, y, spec)
    W = _metric(Phi, r, spec, rng) if spec.knn != "none" else np.eye(Phi.shape[1])
    Z = Phi @ W
    k, weights, constant = 0, spec.knn_weights, 0.0
    if spec.knn == "fixed":
        k = min(spec.n_neighbors, Z.shape[0])
    elif spec.knn == "loo":
        weights = spec.final_knn_weights
        k_max = min(spec.k_max, Z.shape[0] - 1)
        idx = kneighbors(Z, None, k_max, backend=spec.backend)  # type: ignore[arg-type]
        r2 = loo_r2_all_k(r, loo_predictions_all_k(r[idx], weights))
        best = int(np.argmax(r2))
        k, constant = (best + 1, 0.0) if r2[best] > 0 else (0, float(np.mean(r)))
    return Member(individual, scaling, ridge, W, Z, r, k, weights, constant, spec.backend)
