"""Target encoding of categorical columns (upstream ``categorical_encoding="Target"``).

A column is categorical when its pandas dtype is object, category, string or bool-like text, or
(for numpy input) when its values do not all convert to float. Each category becomes the smoothed
mean of y over its rows; a category unseen at fit time gets the global mean.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

SMOOTHING = 1.0  # pseudo-count pulling rare categories towards the global mean


@dataclasses.dataclass
class TargetEncoder:
    columns: list[int]
    tables: list[dict[Any, float]]
    default: float

    def transform(self, columns: list[np.ndarray]) -> list[np.ndarray]:
        out = list(columns)
        for j, table in zip(self.columns, self.tables, strict=True):
            out[j] = np.array([table.get(v, self.default) for v in columns[j]], dtype=np.float64)
        return out


def split_columns(X: Any) -> tuple[list[np.ndarray], list[str] | None, bool]:
    """Columns of X as 1-d arrays, the string feature names (pandas) and whether any is non-numeric."""
    names = None
    if hasattr(X, "columns") and hasattr(X, "dtypes"):
        names = [str(c) for c in X.columns]
        cols = [np.asarray(X.iloc[:, j]) for j in range(X.shape[1])]
    else:
        arr = np.asarray(X)
        if arr.ndim != 2:
            return [], None, False
        cols = [arr[:, j] for j in range(arr.shape[1])]
    return cols, names, any(categorical(c) for c in cols)


def categorical(column: np.ndarray) -> bool:
    if column.dtype.kind in "biufc":  # complex is numeric: validation rejects it clearly
        return False
    try:
        column.astype(np.float64)
    except (TypeError, ValueError):
        return True
    return False


def fit_target_encoder(columns: list[np.ndarray], y: np.ndarray) -> TargetEncoder:
    cats = [j for j, c in enumerate(columns) if categorical(c)]
    mean = float(np.mean(y))
    tables = []
    for j in cats:
        table = {}
        for value in np.unique(columns[j].astype(str)):
            rows = columns[j].astype(str) == value
            table[value] = float((y[rows].sum() + SMOOTHING * mean) / (rows.sum() + SMOOTHING))
        tables.append(table)
    encoder = TargetEncoder(cats, tables, mean)
    return encoder


def encode(encoder: TargetEncoder, columns: list[np.ndarray]) -> np.ndarray:
    as_str = [c.astype(str) if j in encoder.columns else c for j, c in enumerate(columns)]
    return np.column_stack(encoder.transform(as_str)).astype(np.float64)
