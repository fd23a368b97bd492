"""Loaders for the user's own files: CSV, Parquet and ``datasets.save_to_disk`` folders.

pandas, pyarrow and datasets are optional; each is imported only when its loader runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from shared_core.data.registry import register_loader

if TYPE_CHECKING:
    import pandas as pd


def _existing(path: str | os.PathLike[str], *, kind: str) -> Path:
    resolved = Path(path).expanduser()
    if not resolved.exists():
        raise FileNotFoundError(f"{kind} not found: {resolved}")
    return resolved


def _pandas() -> Any:
    try:
        import pandas
    except ImportError as exc:
        raise ImportError(
            "reading CSV/Parquet files needs pandas: pip install 'shared-core[local]'"
        ) from exc
    return pandas


def _split_target(frame: pd.DataFrame, target: str | None, path: Path) -> Any:
    """Return ``frame`` unchanged, or ``(X, y)`` numpy arrays when a target column is named."""
    if target is None:
        return frame
    if target not in frame.columns:
        raise KeyError(
            f"target column {target!r} not in {path}; columns: {', '.join(map(str, frame.columns))}"
        )
    features = frame.drop(columns=[target])
    is_numeric = _pandas().api.types.is_numeric_dtype
    non_numeric = [str(c) for c in features.columns if not is_numeric(features[c])]
    if non_numeric:
        raise ValueError(
            f"feature columns of {path} must be numeric to build X; non-numeric: "
            f"{', '.join(non_numeric)} (load without target= and encode them first)"
        )
    y = frame[target].to_numpy()
    if np.issubdtype(y.dtype, np.floating):
        y = y.astype(np.float32)
    return features.to_numpy(dtype=np.float32), y


@register_loader("csv")
def load_csv(
    path: str | os.PathLike[str], target: str | None = None, **read_kwargs: Any
) -> pd.DataFrame | tuple[np.ndarray, np.ndarray]:
    """Read a CSV file with pandas.

    Without ``target`` the ``DataFrame`` is returned. With ``target`` (a column name) the
    result is ``(X, y)``: the other columns as float32 ``X`` and that column as ``y``
    (float32 when it holds floats, its own dtype otherwise). ``read_kwargs`` go to
    ``pandas.read_csv``.
    """
    resolved = _existing(path, kind="CSV file")
    return _split_target(_pandas().read_csv(resolved, **read_kwargs), target, resolved)


@register_loader("parquet")
def load_parquet(
    path: str | os.PathLike[str], target: str | None = None, **read_kwargs: Any
) -> pd.DataFrame | tuple[np.ndarray, np.ndarray]:
    """Read a Parquet file (or folder of files) with pandas + pyarrow; ``target`` as in :func:`load_csv`."""
    resolved = _existing(path, kind="Parquet file")
    pandas = _pandas()
    try:
        import pyarrow  # noqa: F401 - pandas' parquet engine; checked here for a clear message
    except ImportError as exc:
        raise ImportError(
            "reading Parquet files needs pyarrow: pip install 'shared-core[local]'"
        ) from exc
    return _split_target(pandas.read_parquet(resolved, **read_kwargs), target, resolved)


@register_loader("local_dataset")
def load_local_dataset(path: str | os.PathLike[str]) -> Any:
    """Load a Hugging Face ``datasets`` folder written by ``save_to_disk``."""
    resolved = _existing(path, kind="dataset folder")
    try:
        import datasets
    except ImportError as exc:
        raise ImportError(
            f"loading {resolved} needs the Hugging Face datasets library: pip install datasets"
        ) from exc
    return datasets.load_from_disk(str(resolved))
