"""``AFRNetClassifier``: AFR-Net behind scikit-learn's estimator interface.

``X`` is either a pair ``(sc, fc)`` of ``[B, N, N]`` arrays or a 2-D array ``[B, 2N²]`` made by
:func:`stack_connectomes` (so ``cross_val_score``, ``clone`` and pipelines work). Training follows the
paper's protocol (:func:`afrnet.training.fit`): Adam, cosine schedule, clipping, and the weights of
the best validation AUC on a stratified ``validation_fraction`` of the training data (or on
``X_val``/``y_val``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from afrnet.data import ConnectomeDataset, check_labels
from afrnet.model import AFRNet
from afrnet.training import TrainConfig, fit, predict_scores, subset


def stack_connectomes(sc: ArrayLike, fc: ArrayLike) -> NDArray[np.float64]:
    """``[B, 2N²]``: each row is a subject's flattened SC followed by its flattened FC."""
    s, f = np.asarray(sc, dtype=np.float64), np.asarray(fc, dtype=np.float64)
    if s.ndim != 3 or s.shape != f.shape:
        raise ValueError(f"sc and fc must be [B, N, N] of one shape, got {s.shape} and {f.shape}")
    return np.concatenate([s.reshape(len(s), -1), f.reshape(len(f), -1)], axis=1)


def split_connectomes(X: Any) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The inverse of :func:`stack_connectomes`; a ``(sc, fc)`` pair passes through."""
    if isinstance(X, tuple) and len(X) == 2:
        sc, fc = (np.asarray(x, dtype=np.float64) for x in X)
        if sc.ndim != 3 or sc.shape != fc.shape:
            raise ValueError(
                f"X = (sc, fc) must hold two [B, N, N] arrays of one shape, got {sc.shape}, {fc.shape}"
            )
        return sc, fc
    arr = np.asarray(X, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(
            f"X must be (sc, fc) or a [B, 2N^2] array from stack_connectomes, got shape {arr.shape}"
        )
    n = round(np.sqrt(arr.shape[1] / 2))
    if 2 * n * n != arr.shape[1]:
        raise ValueError(
            f"X has {arr.shape[1]} columns, not 2N^2 for any N (use stack_connectomes)"
        )
    return arr[:, : n * n].reshape(-1, n, n), arr[:, n * n :].reshape(-1, n, n)


class AFRNetClassifier(ClassifierMixin, BaseEstimator):
    """AFR-Net classifier with the official defaults (``main.py``).

    Learned attributes: ``classes_``, ``model_`` (the :class:`AFRNet`), ``history_``,
    ``best_epoch_``, ``n_features_in_``.
    """

    def __init__(
        self,
        *,
        epochs: int = 50,
        batch_size: int = 64,
        lr: float = 5e-4,
        weight_decay: float = 1e-3,
        clip_norm: float = 1.0,
        d_model: int = 64,
        nhead: int = 4,
        dropout: float = 0.3,
        tau: float = 8.0,
        lambda_cost: float = 1.0,
        routing: bool = True,
        validation_fraction: float = 0.1,
        random_state: int = 0,
        device: str = "cpu",
    ) -> None:
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.clip_norm = clip_norm
        self.d_model = d_model
        self.nhead = nhead
        self.dropout = dropout
        self.tau = tau
        self.lambda_cost = lambda_cost
        self.routing = routing
        self.validation_fraction = validation_fraction
        self.random_state = random_state
        self.device = device

    def _dataset(self, X: Any, y: ArrayLike | None = None) -> ConnectomeDataset:
        sc, fc = split_connectomes(X)
        return ConnectomeDataset(sc, fc, y)

    def fit(
        self, X: Any, y: ArrayLike, *, X_val: Any = None, y_val: ArrayLike | None = None
    ) -> AFRNetClassifier:
        from sklearn.model_selection import train_test_split

        y_arr = np.asarray(y)
        self.classes_, encoded = np.unique(y_arr, return_inverse=True)
        encoded = check_labels(encoded.astype(np.int64), len(self.classes_))
        data = self._dataset(X, encoded)
        self.n_features_in_ = 2 * data.num_nodes**2
        if X_val is not None:
            if y_val is None:
                raise ValueError("X_val needs y_val")
            val_codes = np.searchsorted(self.classes_, np.asarray(y_val))
            if not np.array_equal(
                self.classes_[np.clip(val_codes, 0, len(self.classes_) - 1)], np.asarray(y_val)
            ):
                raise ValueError(
                    f"y_val has labels outside the training classes {self.classes_.tolist()}"
                )
            train, val = data, self._dataset(X_val, val_codes)
        elif self.validation_fraction > 0:
            tr, va = train_test_split(
                np.arange(len(data)), test_size=self.validation_fraction, stratify=encoded,
                random_state=self.random_state,
            )  # fmt: skip
            train, val = subset(data, np.sort(tr)), subset(data, np.sort(va))
        else:
            train, val = data, None
        torch.manual_seed(self.random_state)
        self.model_ = AFRNet(
            data.num_nodes, d_model=self.d_model, nhead=self.nhead, dropout=self.dropout,
            tau=self.tau, lambda_cost=self.lambda_cost, num_classes=len(self.classes_),
            routing=self.routing,
        ).to(self.device)  # fmt: skip
        config = TrainConfig(
            epochs=self.epochs, batch_size=self.batch_size, lr=self.lr,
            weight_decay=self.weight_decay, clip_norm=self.clip_norm, seed=self.random_state,
        )  # fmt: skip
        result = fit(self.model_, train, val, config)
        self.history_ = result.history
        self.best_epoch_ = result.best_epoch
        return self

    def predict_proba(self, X: Any) -> NDArray[np.float64]:
        check_is_fitted(self, "model_")
        data = self._dataset(X)
        if data.num_nodes**2 * 2 != self.n_features_in_:
            raise ValueError(
                f"X has N = {data.num_nodes} regions; the model was fitted on {int(np.sqrt(self.n_features_in_ / 2))}"
            )
        return predict_scores(self.model_, data, self.batch_size)

    def predict(self, X: Any) -> NDArray[Any]:
        check_is_fitted(self, "model_")
        return np.asarray(self.classes_[self.predict_proba(X).argmax(1)])
