"""Connectome preprocessing and the checks every entry point runs on SC and FC.

The paper's ABCD path (``dial/data.py``): ``S <- minmax(log1p(max(S, 0)))`` over the whole matrix and
``F <- F * 1[|F| >= q_0.70(|F|)]`` (the strongest 30 % by |value|, quantile over all N² entries).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

SYMMETRY_TOL = 1e-6
FC_RANGE_TOL = 1e-6


def _square_stack(x: ArrayLike, name: str) -> NDArray[np.float64]:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim not in (2, 3) or arr.shape[-1] != arr.shape[-2]:
        raise ValueError(
            f"{name} must be a square [N, N] or [B, N, N] matrix, got shape {arr.shape}"
        )
    if arr.shape[-1] < 2:
        raise ValueError(f"{name} needs at least 2 regions, got N = {arr.shape[-1]}")
    return arr


def check_sc(sc: ArrayLike, *, symmetrize: bool = False, name: str = "sc") -> NDArray[np.float64]:
    """``sc`` as float64, after checking it is finite, square, non-negative and symmetric.

    ``symmetrize=True`` replaces an asymmetric SC by ``(S + Sᵀ)/2`` instead of raising.
    """
    arr = _square_stack(sc, name)
    if not np.isfinite(arr).all():
        bad = np.argwhere(~np.isfinite(arr))[0].tolist()
        raise ValueError(f"{name} has a non-finite entry at index {bad}")
    if (arr < 0).any():
        bad = np.argwhere(arr < 0)[0].tolist()
        raise ValueError(
            f"{name} must be non-negative (streamline counts or densities); entry {bad} is "
            f"{arr[tuple(bad)]:.4g}. Clip it (np.maximum(sc, 0)) or use preprocess_sc, which does"
        )
    gap = np.abs(arr - np.swapaxes(arr, -1, -2))
    scale = max(float(np.abs(arr).max()), 1.0)
    if gap.max() > SYMMETRY_TOL * scale:
        if not symmetrize:
            bad = np.unravel_index(int(gap.argmax()), gap.shape)
            raise ValueError(
                f"{name} must be symmetric (tolerance {SYMMETRY_TOL:g} x max|S|); the largest gap "
                f"is {gap.max():.4g} at index {list(map(int, bad))}. Pass symmetrize=True to use "
                "(S + S^T) / 2"
            )
        arr = 0.5 * (arr + np.swapaxes(arr, -1, -2))
    return arr


def check_fc(
    fc: ArrayLike, *, num_nodes: int | None = None, name: str = "fc"
) -> NDArray[np.float64]:
    """``fc`` as float64, after checking it is finite, square, in [-1, 1] and of ``num_nodes``."""
    arr = _square_stack(fc, name)
    if np.isnan(arr).any():
        bad = np.argwhere(np.isnan(arr))[0].tolist()
        raise ValueError(
            f"{name} has NaN at index {bad} (a constant time series gives an undefined "
            "correlation); drop or impute that region first"
        )
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} has an infinite entry")
    low, high = float(arr.min()), float(arr.max())
    if low < -1 - FC_RANGE_TOL or high > 1 + FC_RANGE_TOL:
        raise ValueError(
            f"{name} must be a correlation matrix with values in [-1, 1], got range "
            f"[{low:.4g}, {high:.4g}]"
        )
    if num_nodes is not None and arr.shape[-1] != num_nodes:
        raise ValueError(f"{name} has N = {arr.shape[-1]} regions but sc has N = {num_nodes}")
    return arr


def preprocess_sc(
    sc: ArrayLike,
    method: Literal["log_minmax", "none"] = "log_minmax",
    *,
    sparsify: Literal["topk", "threshold"] | None = None,
    k: int = 10,
    threshold: float = 0.0,
    symmetrize: bool = False,
) -> NDArray[np.float64]:
    """The paper's SC normalisation, optionally followed by sparsification.

    ``"log_minmax"``: ``minmax(log1p(max(S, 0)))`` over each whole matrix (so the minimum entry,
    usually the zero diagonal, maps to 0), as ``dial/data.py``; ``"none"`` keeps the raw values
    (the PPMI path). Negative entries are clipped by ``log_minmax`` as the official code does;
    ``"none"`` rejects them. ``sparsify`` then applies :func:`sparsify_sc`.
    """
    arr = np.asarray(sc, dtype=np.float64)
    if method == "log_minmax":
        arr = np.log1p(np.maximum(_square_stack(arr, "sc"), 0.0))
        low = arr.min(axis=(-2, -1), keepdims=True)
        span = arr.max(axis=(-2, -1), keepdims=True) - low
        arr = np.where(span > 0, (arr - low) / np.where(span > 0, span, 1.0), arr - low)
    elif method != "none":
        raise ValueError(f"method must be 'log_minmax' or 'none', got {method!r}")
    arr = check_sc(arr, symmetrize=symmetrize)
    if sparsify is not None:
        arr = sparsify_sc(arr, sparsify, k=k, threshold=threshold)
    return arr


def sparsify_sc(
    sc: ArrayLike,
    method: Literal["topk", "threshold"] = "topk",
    *,
    k: int = 10,
    threshold: float = 0.0,
) -> NDArray[np.float64]:
    """Drop weak SC edges, keeping the matrix symmetric.

    ``"topk"``: an edge survives if it is among the ``k`` strongest of either endpoint (the union
    keeps every node connected to its strongest neighbours); ``"threshold"``: keep ``S > threshold``.
    Raises if no edge is left.
    """
    arr = check_sc(sc)
    n = arr.shape[-1]
    off = arr * (1.0 - np.eye(n))
    if method == "topk":
        if not 1 <= k < n:
            raise ValueError(f"k must be in [1, N - 1] = [1, {n - 1}], got {k}")
        order = np.argsort(-off, axis=-1, kind="stable")[..., :k]
        keep = np.zeros(off.shape, dtype=bool)
        np.put_along_axis(keep, order, True, axis=-1)
        keep = (keep | np.swapaxes(keep, -1, -2)) & (off > 0)
    elif method == "threshold":
        keep = off > threshold
    else:
        raise ValueError(f"sparsify must be 'topk', 'threshold' or None, got {method!r}")
    out = np.where(keep, arr, 0.0)
    edges = np.triu(keep, 1).sum(axis=(-2, -1))
    if np.any(edges == 0):
        raise ValueError(
            f"no SC edge is left after sparsify={method!r} (k={k}, threshold={threshold}); "
            "lower the threshold"
        )
    return out


def filter_fc(
    fc: ArrayLike, keep: float = 0.30, *, mode: Literal["abs", "positive"] = "abs"
) -> NDArray[np.float64]:
    """Keep the strongest ``keep`` fraction of FC entries and zero the rest.

    ``mode="abs"`` is the paper's rule: ``|F| >= q_{1-keep}(|F|)`` with the quantile over all N²
    entries of each matrix (diagonal included). ``mode="positive"`` first zeros negative
    correlations (what many GNN pipelines expect), then applies the same rule to what remains.
    """
    arr = check_fc(fc)
    if not 0.0 < keep <= 1.0:
        raise ValueError(f"keep must be in (0, 1], got {keep}")
    if mode == "positive":
        arr = np.maximum(arr, 0.0)
    elif mode != "abs":
        raise ValueError(f"mode must be 'abs' or 'positive', got {mode!r}")
    mags = np.abs(arr)
    flat = mags.reshape(*mags.shape[:-2], -1)
    cut = np.quantile(flat, 1.0 - keep, axis=-1)[..., None, None]
    out = np.where(mags >= cut, arr, 0.0)
    if not np.any(np.triu(out != 0, 1)):
        raise ValueError(f"no FC entry is left off the diagonal after filter_fc(keep={keep})")
    return out


def fc_from_timeseries(
    timeseries: ArrayLike, kind: Literal["correlation", "partial correlation"] = "correlation"
) -> NDArray[np.float64]:
    """FC from region time series ``[T, N]`` (or ``[B, T, N]``), as nilearn's ConnectivityMeasure.

    ``"correlation"``: the Pearson correlation of the columns with a unit diagonal, as nilearn's
    ``kind="correlation"`` with its default empirical covariance; ``"partial correlation"``: from
    the inverse covariance. A constant region (zero variance) raises instead of giving NaN.
    """
    ts = np.asarray(timeseries, dtype=np.float64)
    if ts.ndim == 2:
        return _fc_one(ts, kind)
    if ts.ndim != 3:
        raise ValueError(f"timeseries must be [T, N] or [B, T, N], got shape {ts.shape}")
    return np.stack([_fc_one(t, kind) for t in ts])


def _fc_one(ts: NDArray[np.float64], kind: str) -> NDArray[np.float64]:
    if ts.shape[0] < 3:
        raise ValueError(f"timeseries needs at least 3 time points, got shape {ts.shape}")
    if not np.isfinite(ts).all():
        raise ValueError("timeseries has a non-finite value")
    centred = ts - ts.mean(axis=0)
    cov = centred.T @ centred / ts.shape[0]
    std = np.sqrt(np.diag(cov))
    if np.any(std <= 1e-12 * max(float(std.max()), 1e-300)):
        flat = np.flatnonzero(std <= 1e-12 * max(float(std.max()), 1e-300)).tolist()
        raise ValueError(
            f"regions {flat} have constant time series: their correlation is undefined"
        )
    if kind == "correlation":
        corr = cov / np.outer(std, std)
    elif kind == "partial correlation":
        prec = np.linalg.inv(cov)
        d = np.sqrt(np.diag(prec))
        corr = -prec / np.outer(d, d)
    else:
        raise ValueError(f"kind must be 'correlation' or 'partial correlation', got {kind!r}")
    np.fill_diagonal(corr, 1.0)
    return np.clip(corr, -1.0, 1.0)


def components(adjacency: ArrayLike) -> list[list[int]]:
    """Connected components of one graph (``adjacency != 0``), largest first."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    adj = np.asarray(adjacency) != 0
    _, labels = connected_components(csr_matrix(adj), directed=False)
    groups = [np.flatnonzero(labels == c).tolist() for c in np.unique(labels)]
    return sorted(groups, key=len, reverse=True)


def describe_components(groups: list[list[int]], limit: int = 6) -> str:
    shown = [g if len(g) <= 8 else [*g[:8], "..."] for g in groups[:limit]]
    more = f" and {len(groups) - limit} more" if len(groups) > limit else ""
    return f"{len(groups)} components {shown}{more}"
