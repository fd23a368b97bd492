"""The unsupervised baselines of the claims, in the encoder's API (``transform(X, contrast, noise)``).

``ICACoder`` and ``SparseCoder`` wrap scikit-learn's ``FastICA`` and ``MiniBatchDictionaryLearning``
(lasso codes); ``LCA`` is the locally competitive algorithm of Rozell et al. (2008), ours. The
ablated SSN is :meth:`ssn_lateral.SSNEncoder.ablated`.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ssn_lateral.data import degrade

__all__ = ["LCA", "ICACoder", "SparseCoder", "data_rank", "lca_codes"]


class _Degraded(TransformerMixin, BaseEstimator):
    """``transform(X, contrast, noise)`` = the fitted model's code of ``contrast X + noise xi``."""

    def _encode(self, X: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def transform(
        self,
        X: np.ndarray,
        contrast: float = 1.0,
        noise: float = 0.0,
        random_state: int | np.random.Generator | None = None,
    ) -> np.ndarray:
        check_is_fitted(self, "model_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return self._encode(degrade(X, contrast, noise, random_state))


def data_rank(X: np.ndarray, rtol: float = 1e-8) -> int:
    """The number of directions with variance in ``X`` (centred), relative tolerance ``rtol``.

    Per-patch mean removal (:func:`ssn_lateral.data.natural_patches`) leaves the DC direction
    empty: ``d`` pixels give rank ``d - 1``.
    """
    s = np.linalg.svd(X - X.mean(axis=0), compute_uv=False)
    return int((s > rtol * s.max()).sum()) if s.size and s.max() > 0 else 0


class ICACoder(_Degraded):
    """``FastICA(n_components)``; the code is the unmixed sources of the degraded patch.

    ``n_components=None`` takes the rank of the training data (63 for mean-removed 8x8 patches).
    More components than that rank would whiten an empty direction: its unmixing row is scaled by
    ``1 / sqrt(~1e-17)``, and any noise along it swamps the code, so ``fit`` refuses it.
    """

    def __init__(
        self, n_components: int | None = None, max_iter: int = 400, random_state: int | None = None
    ):
        self.n_components = n_components
        self.max_iter = max_iter
        self.random_state = random_state

    def fit(self, X: np.ndarray, y: object = None) -> ICACoder:
        from sklearn.decomposition import FastICA

        X = validate_data(self, X, dtype=np.float64)
        rank = data_rank(X)
        n = rank if self.n_components is None else self.n_components
        if not isinstance(n, (int, np.integer)) or not 1 <= n <= rank:
            raise ValueError(
                f"n_components must be an int in [1, rank of X = {rank}] or None, got "
                f"{self.n_components!r}: components beyond the data's rank unmix empty directions "
                "and amplify noise there by orders of magnitude"
            )
        self.n_components_ = int(n)
        self.model_ = FastICA(
            self.n_components_,
            whiten="unit-variance",
            max_iter=self.max_iter,
            random_state=self.random_state,
        ).fit(X)
        return self

    def _encode(self, X: np.ndarray) -> np.ndarray:
        return self.model_.transform(X)


class SparseCoder(_Degraded):
    """``MiniBatchDictionaryLearning(n_components, alpha)`` with lasso codes (Olshausen-Field)."""

    def __init__(
        self,
        n_components: int = 64,
        alpha: float = 0.1,
        max_iter: int = 20,
        batch_size: int = 256,
        random_state: int | None = None,
    ):
        self.n_components = n_components
        self.alpha = alpha
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.random_state = random_state

    def fit(self, X: np.ndarray, y: object = None) -> SparseCoder:
        from sklearn.decomposition import MiniBatchDictionaryLearning

        X = validate_data(self, X, dtype=np.float64)
        self.model_ = MiniBatchDictionaryLearning(
            self.n_components,
            alpha=self.alpha,
            max_iter=self.max_iter,
            batch_size=self.batch_size,
            transform_algorithm="lasso_cd",
            transform_alpha=self.alpha,
            random_state=self.random_state,
        ).fit(X)
        self.components_ = self.model_.components_
        return self

    def _encode(self, X: np.ndarray) -> np.ndarray:
        return self.model_.transform(X)


def lca_codes(
    X: np.ndarray, D: np.ndarray, lam: float, *, n_steps: int = 200, dt_over_tau: float = 0.1
) -> np.ndarray:
    """Locally competitive algorithm: ``tau du/dt = D x - u - (D D^T - I) a``, ``a = soft(u, lam)``.

    ``D`` is ``(n_atoms, n_features)`` with unit-norm rows; the fixed point is the lasso solution of
    ``min_a 0.5 |x - a D|^2 + lam |a|_1`` (Rozell et al. 2008).
    """
    drive = X @ D.T
    inhibition = D @ D.T - np.eye(D.shape[0])
    u = np.zeros_like(drive)
    for _ in range(n_steps):
        a = np.sign(u) * np.maximum(np.abs(u) - lam, 0.0)
        u += dt_over_tau * (drive - u - a @ inhibition)
    return np.sign(u) * np.maximum(np.abs(u) - lam, 0.0)


class LCA(_Degraded):
    """LCA codes on a dictionary learned by ``MiniBatchDictionaryLearning`` (unit-norm atoms)."""

    def __init__(
        self,
        n_components: int = 64,
        lam: float = 0.1,
        n_steps: int = 200,
        max_iter: int = 20,
        random_state: int | None = None,
    ):
        self.n_components = n_components
        self.lam = lam
        self.n_steps = n_steps
        self.max_iter = max_iter
        self.random_state = random_state

    def fit(self, X: np.ndarray, y: object = None) -> LCA:
        from sklearn.decomposition import MiniBatchDictionaryLearning

        X = validate_data(self, X, dtype=np.float64)
        self.model_ = MiniBatchDictionaryLearning(
            self.n_components,
            alpha=self.lam,
            max_iter=self.max_iter,
            random_state=self.random_state,
        ).fit(X)
        D = self.model_.components_
        self.components_ = D / np.maximum(np.linalg.norm(D, axis=1, keepdims=True), 1e-12)
        return self

    def _encode(self, X: np.ndarray) -> np.ndarray:
        return lca_codes(X, self.components_, self.lam, n_steps=self.n_steps)
