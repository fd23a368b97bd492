"""k-nearest-neighbour regression with every leave-one-out K from one neighbour query.

The upstream ``RobustFaissKNNRegressor`` trick: query ``K_max`` neighbours of every training point
with the point itself excluded (by index, so duplicate points stay neighbours of each other), and
the leave-one-out prediction for every K = 1..K_max is a prefix (weighted) mean of the same sorted
neighbour targets. ``R²_LOO(K) = 1 − MSE_K / Var(y)`` picks K; a best ``R²_LOO ≤ 0`` means no K
beats the mean, and the model predicts the constant ``mean(y)``.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

Weights = Literal["uniform", "linear_rank"]
WEIGHTS: tuple[str, ...] = ("uniform", "linear_rank")
BLOCK = 2048  # query rows per distance block: bounds memory at BLOCK × n floats


def linear_rank_weights(k: int) -> np.ndarray:
    """Weight of neighbour rank j = 1..k: ``(k − j + 1) / (k (k + 1) / 2)``; sums to 1."""
    return np.arange(k, 0, -1, dtype=np.float64) / (k * (k + 1) / 2.0)


def _sq_distances(Q: np.ndarray, R: np.ndarray) -> np.ndarray:
    d = (Q * Q).sum(1)[:, None] + (R * R).sum(1)[None, :] - 2.0 * (Q @ R.T)
    return np.maximum(d, 0.0)


def kneighbors(
    reference: np.ndarray,
    query: np.ndarray | None,
    k: int,
    *,
    backend: Literal["numpy", "torch"] = "numpy",
) -> np.ndarray:
    """Indices (m × k) of the ``k`` nearest reference rows of each query row, nearest first.

    ``query=None`` queries the reference rows themselves *excluding each row by index* (the
    leave-one-out neighbours). Ties are broken by the lower index. ``backend="torch"`` uses
    ``torch.cdist`` + ``topk`` (any device the tensors live on; CPU here).
    """
    if backend == "torch":
        return _kneighbors_torch(reference, query, k)
    exclude = query is None
    Q = reference if query is None else query
    out = np.empty((Q.shape[0], k), dtype=np.intp)
    for start in range(0, Q.shape[0], BLOCK):
        d = _sq_distances(Q[start : start + BLOCK], reference)
        if exclude:
            rows = np.arange(d.shape[0])
            d[rows, start + rows] = np.inf
        if k < d.shape[1]:
            part = np.argpartition(d, k - 1, axis=1)[:, :k]
        else:
            part = np.broadcast_to(np.arange(d.shape[1]), d.shape).copy()
        pd = np.take_along_axis(d, part, 1)
        # sort by (distance, index): lexsort's last key is the primary one
        order = np.lexsort((part, pd), axis=1)
        out[start : start + BLOCK] = np.take_along_axis(part, order, 1)
    return out


def _kneighbors_torch(reference: np.ndarray, query: np.ndarray | None, k: int) -> np.ndarray:
    import torch

    R = torch.as_tensor(reference, dtype=torch.float64)
    Q = R if query is None else torch.as_tensor(query, dtype=torch.float64)
    out = []
    for start in range(0, Q.shape[0], BLOCK):
        q = Q[start : start + BLOCK]
        d = torch.cdist(q, R, compute_mode="donot_use_mm_for_euclid_dist").square()
        if query is None:
            rows = torch.arange(q.shape[0])
            d[rows, start + rows] = torch.inf
        # topk is not stable on ties: sort (distance, index) pairs explicitly, as numpy does
        idx = torch.topk(d, k, dim=1, largest=False, sorted=True).indices
        dk = torch.gather(d, 1, idx)
        key = torch.argsort(idx, dim=1, stable=True)
        idx, dk = torch.gather(idx, 1, key), torch.gather(dk, 1, key)
        order = torch.argsort(dk, dim=1, stable=True)
        out.append(torch.gather(idx, 1, order))
    return torch.cat(out).numpy().astype(np.intp)


def knn_predict(neighbour_targets: np.ndarray, weights: str) -> np.ndarray:
    """Prediction from the sorted neighbour targets (m × k) with uniform or linear-rank weights."""
    k = neighbour_targets.shape[1]
    if weights == "uniform":
        return neighbour_targets.mean(axis=1)
    return neighbour_targets @ linear_rank_weights(k)


def loo_predictions_all_k(neighbour_targets: np.ndarray, weights: str) -> np.ndarray:
    """LOO predictions for every K at once (n × K_max) from the sorted LOO neighbour targets.

    Uniform: prefix means. Linear rank: ``Σ_j (K + 1 − j) y_(j) = (K + 1) S_K − T_K`` with prefix
    sums ``S_K = Σ_{j≤K} y_(j)`` and ``T_K = Σ_{j≤K} j y_(j)``, divided by ``K (K + 1) / 2``.
    """
    k_max = neighbour_targets.shape[1]
    ks = np.arange(1, k_max + 1, dtype=np.float64)
    S = np.cumsum(neighbour_targets, axis=1)
    if weights == "uniform":
        return S / ks
    T = np.cumsum(neighbour_targets * ks, axis=1)
    return ((ks + 1) * S - T) / (ks * (ks + 1) / 2.0)


def loo_r2_all_k(y: np.ndarray, loo: np.ndarray) -> np.ndarray:
    """``R²_LOO(K) = 1 − MSE_K / Var(y)`` for every column K of ``loo``."""
    var = float(np.var(y))
    mse = np.mean((loo - y[:, None]) ** 2, axis=0)
    return 1.0 - mse / var if var > 0 else np.full(loo.shape[1], -np.inf)


class LOOKNeighborsRegressor(RegressorMixin, BaseEstimator):
    """k-NN regression whose K is chosen by exact leave-one-out, every K from one query.

    Parameters
    ----------
    k_max : int, default 30
        Largest K tried (clamped to ``n_samples − 1`` with a warning).
    k_min : int, default 1
        Smallest K tried.
    weights : {"uniform", "linear_rank"}, default "uniform"
        Neighbour weights; ``linear_rank`` gives rank j the weight ``(K − j + 1) / (K (K + 1) / 2)``.
    fallback_constant : bool, default True
        Predict ``mean(y)`` when no K has a positive leave-one-out R².
    backend : {"numpy", "torch"}, default "numpy"
        Neighbour search; ``torch`` uses ``torch.cdist`` + ``topk``.

    Attributes
    ----------
    n_neighbors_ : int
        The selected K (0 when the constant fallback is used).
    loo_r2_ : ndarray of shape (k_max,)
        Leave-one-out R² of K = 1..k_max (entries below ``k_min`` are ``-inf``).
    constant_ : bool
        Whether the constant fallback is used.
    """

    def __init__(
        self,
        k_max: int = 30,
        k_min: int = 1,
        weights: str = "uniform",
        fallback_constant: bool = True,
        backend: str = "numpy",
    ) -> None:
        self.k_max = k_max
        self.k_min = k_min
        self.weights = weights
        self.fallback_constant = fallback_constant
        self.backend = backend

    def _validate_params(self) -> None:
        if self.weights not in WEIGHTS:
            raise ValueError(f"weights must be one of {WEIGHTS}, got {self.weights!r}")
        if self.backend not in ("numpy", "torch"):
            raise ValueError(f"backend must be 'numpy' or 'torch', got {self.backend!r}")
        for name in ("k_max", "k_min"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if self.k_min > self.k_max:
            raise ValueError(f"k_min must be <= k_max, got k_min={self.k_min}, k_max={self.k_max}")

    def fit(self, X: Any, y: Any) -> LOOKNeighborsRegressor:
        self._validate_params()
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        n = X.shape[0]
        if n < 3:
            raise ValueError(f"LOOKNeighborsRegressor needs at least 3 samples, got n_samples={n}")
        k_max = int(self.k_max)
        if k_max > n - 1:
            warnings.warn(
                f"k_max={k_max} >= n_samples={n}; clamped to n_samples - 1 = {n - 1}",
                UserWarning,
                stacklevel=2,
            )
            k_max = n - 1
        k_min = min(int(self.k_min), k_max)
        self.X_fit_, self.y_fit_ = X, y
        idx = kneighbors(X, None, k_max, backend=self.backend)  # type: ignore[arg-type]
        r2 = loo_r2_all_k(y, loo_predictions_all_k(y[idx], self.weights))
        r2[: k_min - 1] = -np.inf
        self.loo_r2_ = r2
        best = int(np.argmax(r2))
        self.constant_ = bool(self.fallback_constant and r2[best] <= 0)
        self.n_neighbors_ = 0 if self.constant_ else best + 1
        self.mean_ = float(np.mean(y))
        return self

    def predict(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "loo_r2_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        if self.constant_:
            return np.full(X.shape[0], self.mean_)
        idx = kneighbors(self.X_fit_, X, self.n_neighbors_, backend=self.backend)  # type: ignore[arg-type]
        return knn_predict(self.y_fit_[idx], self.weights)
