"""The global part: a safe feature scaler and ``RidgeCV`` with efficient leave-one-out over alphas.

``ridge_cv`` is scikit-learn's ``RidgeCV()`` (alphas 0.1, 1, 10, an unpenalised intercept, alpha
picked by the mean squared leave-one-out error) written on one thin SVD so that thousands of
evaluations do not pay scikit-learn's per-call validation.
"""

from __future__ import annotations

import dataclasses

import numpy as np

ALPHAS: tuple[float, ...] = (0.1, 1.0, 10.0)
FLOAT32_MAX = float(np.finfo(np.float32).max)


@dataclasses.dataclass(frozen=True)
class Scaling:
    """``(Φ − mean) / scale``, with NaN/±inf mapped to 0 (upstream ``SafetyScaler``)."""

    mean: np.ndarray
    scale: np.ndarray

    def __call__(self, Phi: np.ndarray) -> np.ndarray:
        Z = (Phi - self.mean) / self.scale
        return np.where(np.isfinite(Z), Z, 0.0)


def fit_scaling(Phi: np.ndarray) -> Scaling:
    """Standardise each column; a zero-variance column keeps scale 1.

    As upstream: if any value exceeds float32's range the data are only centred (scale 1).
    """
    mean = Phi.mean(axis=0)
    if np.abs(Phi).max(initial=0.0) > FLOAT32_MAX:
        return Scaling(mean, np.ones(Phi.shape[1]))
    std = Phi.std(axis=0)
    return Scaling(mean, np.where(std > 1e-12 * (1.0 + np.abs(mean)), std, 1.0))


@dataclasses.dataclass(frozen=True)
class Ridge:
    coef: np.ndarray
    intercept: float
    alpha: float

    def predict(self, Phi: np.ndarray) -> np.ndarray:
        return Phi @ self.coef + self.intercept


def ridge_cv(Phi: np.ndarray, y: np.ndarray, alphas: tuple[float, ...] = ALPHAS) -> Ridge:
    """``RidgeCV(alphas)`` with intercept: alpha by efficient LOO (GCV) on the thin SVD.

    With centred ``Φ_c = U S Vᵀ`` the hat matrix diagonal is ``1/n + Σ_j U_ij² s_j²/(s_j² + α)``
    (the intercept is unpenalised) and the LOO residual is ``e_i / (1 − h_ii)``.
    """
    n = Phi.shape[0]
    x_mean, y_mean = Phi.mean(axis=0), float(y.mean())
    Xc, yc = Phi - x_mean, y - y_mean
    U, s, Vt = np.linalg.svd(Xc, full_matrices=False)
    Uty = U.T @ yc
    s2 = s * s
    U2 = U * U
    best: tuple[float, float, np.ndarray] | None = None
    for alpha in alphas:
        shrink = s2 / (s2 + alpha)
        fitted = U @ (shrink * Uty)
        h = 1.0 / n + U2 @ shrink
        loo = (yc - fitted) / (1.0 - h)
        mse = float(np.mean(loo * loo))
        if best is None or mse < best[0]:
            best = (mse, alpha, Vt.T @ (s / (s2 + alpha) * Uty))
    assert best is not None
    _, alpha, coef = best
    return Ridge(coef, y_mean - float(x_mean @ coef), float(alpha))
