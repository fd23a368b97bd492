"""Offline tabular data: scikit-learn's bundled sets and seeded generators.

scikit-learn is imported inside the functions, so importing this module stays cheap.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from shared_core.data.registry import register_loader

# name -> (sklearn loader function name, task). Every one ships inside the scikit-learn wheel.
_BUNDLED: dict[str, tuple[str, str]] = {
    "breast_cancer": ("load_breast_cancer", "classification"),
    "diabetes": ("load_diabetes", "regression"),
    "digits": ("load_digits", "classification"),
    "iris": ("load_iris", "classification"),
    "wine": ("load_wine", "classification"),
}

TABULAR_DATASETS: tuple[str, ...] = tuple(sorted(_BUNDLED))


def _sklearn_datasets() -> Any:
    try:
        import sklearn.datasets
    except ImportError as exc:
        raise ImportError(
            "tabular data needs scikit-learn: pip install 'shared-core[data]'"
        ) from exc
    return sklearn.datasets


def _targets(y: np.ndarray, task: str) -> np.ndarray:
    return y.astype(np.int64) if task == "classification" else y.astype(np.float32)


def load_tabular(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Load a scikit-learn bundled data set as ``(X, y)``.

    ``X`` is float32 of shape (n, d); ``y`` is int64 class labels for classification
    sets and float32 for ``diabetes`` (regression). No network access is needed.
    """
    try:
        loader_name, task = _BUNDLED[name]
    except KeyError:
        raise KeyError(
            f"unknown tabular data set {name!r}; available: {', '.join(TABULAR_DATASETS)}"
        ) from None
    X, y = getattr(_sklearn_datasets(), loader_name)(return_X_y=True)
    return np.asarray(X, dtype=np.float32), _targets(np.asarray(y), task)


@register_loader("regression")
def make_regression(
    n_samples: int = 200, n_features: int = 10, *, noise: float = 0.1, seed: int = 0, **kwargs: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Seeded ``sklearn.datasets.make_regression``: float32 ``(X, y)``.

    Extra ``kwargs`` (``n_informative``, ``bias``, ...) go to scikit-learn unchanged.
    """
    X, y = _sklearn_datasets().make_regression(
        n_samples=n_samples, n_features=n_features, noise=noise, random_state=seed, **kwargs
    )
    return X.astype(np.float32), y.astype(np.float32)


@register_loader("classification")
def make_classification(
    n_samples: int = 200,
    n_features: int = 10,
    *,
    n_classes: int = 2,
    seed: int = 0,
    **kwargs: Any,
) -> tuple[np.ndarray, np.ndarray]:
    """Seeded ``sklearn.datasets.make_classification``: float32 ``X``, int64 ``y``.

    Extra ``kwargs`` (``n_informative``, ``class_sep``, ...) go to scikit-learn unchanged.
    """
    X, y = _sklearn_datasets().make_classification(
        n_samples=n_samples,
        n_features=n_features,
        n_classes=n_classes,
        random_state=seed,
        **kwargs,
    )
    return X.astype(np.float32), y.astype(np.int64)


for _name in TABULAR_DATASETS:
    register_loader(_name)(functools.partial(load_tabular, _name))
