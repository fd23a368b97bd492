"""Classical error-bounded compressors on the same frames: SZ3 (``pysz``), ZFP (``zfpy``), Blosc2.

Each returns a :class:`Compressed` (the bytes, the ratio and the reconstruction). Inputs are made
C-contiguous first (zfp and numcodecs reject sliced / Fortran-order views). These live in the
``peers`` extra (the issue's "baselines") and are imported when called.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

ZFP_DTYPES = (np.float32, np.float64, np.int32, np.int64)
SZ_DTYPES = (np.float32, np.float64, np.int32, np.int64)


@dataclass
class Compressed:
    payload: bytes
    ratio: float  # original bytes / compressed bytes
    recon: np.ndarray


def _as_array(x: object, allowed: tuple[type, ...], who: str) -> np.ndarray:
    arr = np.asarray(x.numpy() if hasattr(x, "numpy") else x)
    if arr.dtype.type not in allowed:
        names = ", ".join(np.dtype(t).name for t in allowed)
        raise TypeError(f"{who} supports {names} only, got {arr.dtype}")
    if arr.size == 0:
        raise ValueError(f"{who}: empty array")
    if not np.isfinite(arr).all():
        raise ValueError(f"{who}: the array contains NaN/Inf (mask them before compressing)")
    return np.ascontiguousarray(arr)


def _positive(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")


def sz3_compress(x: object, abs_error: float) -> Compressed:
    """SZ3 in absolute-error mode: ``max|x - recon| <= abs_error``."""
    import pysz

    _positive("abs_error", abs_error)
    arr = _as_array(x, SZ_DTYPES, "SZ3")
    config = pysz.szConfig()
    config.errorBoundMode = pysz.szErrorBoundMode.ABS
    config.absErrorBound = float(abs_error)
    packed, _ = pysz.sz.compress(arr, config)
    recon, _ = pysz.sz.decompress(packed, arr.dtype, arr.shape)
    payload = packed.tobytes()
    return Compressed(payload, arr.nbytes / len(payload), np.asarray(recon).reshape(arr.shape))


def zfp_compress(x: object, tolerance: float) -> Compressed:
    """ZFP in fixed-accuracy mode (``tolerance``: absolute error bound)."""
    import zfpy

    _positive("tolerance", tolerance)
    arr = _as_array(x, ZFP_DTYPES, "ZFP")
    payload = zfpy.compress_numpy(arr, tolerance=float(tolerance))
    return Compressed(payload, arr.nbytes / len(payload), zfpy.decompress_numpy(payload))


def blosc2_compress(x: object, trunc_bits: int | None = None, clevel: int = 5) -> Compressed:
    """Blosc2 zstd with byte shuffle; ``trunc_bits`` keeps that many mantissa bits (lossy)."""
    import blosc2

    arr = _as_array(x, (np.float32, np.float64), "Blosc2")
    filters, meta = [blosc2.Filter.SHUFFLE], [0]
    if trunc_bits is not None:
        filters, meta = [blosc2.Filter.TRUNC_PREC, blosc2.Filter.SHUFFLE], [int(trunc_bits), 0]
    payload = blosc2.compress2(
        arr.tobytes(),
        codec=blosc2.Codec.ZSTD,
        clevel=clevel,
        typesize=arr.itemsize,
        filters=filters,
        filters_meta=meta,
    )
    recon = np.frombuffer(blosc2.decompress2(payload), dtype=arr.dtype).reshape(arr.shape)
    return Compressed(bytes(payload), arr.nbytes / len(payload), recon)


def rel_l2_np(x: np.ndarray, ref: np.ndarray) -> float:
    ref64 = ref.astype(np.float64)
    return float(np.linalg.norm(x.astype(np.float64) - ref64) / np.linalg.norm(ref64))


def match_rel_l2(
    compress: Callable[[np.ndarray, float], Compressed],
    x: np.ndarray,
    target: float,
    lo: float,
    hi: float,
    iters: int = 30,
) -> tuple[float, Compressed]:
    """The largest error bound in ``[lo, hi]`` whose rel-L2 stays <= ``target`` (bisection in log space).

    ``compress(x, bound) -> Compressed``; rel-L2 grows with the bound for SZ3 and ZFP.
    """
    best_b, best = lo, compress(x, lo)
    if rel_l2_np(best.recon, x) > target:
        return best_b, best
    a, b = float(np.log(lo)), float(np.log(hi))
    for _ in range(iters):
        mid = float(np.exp((a + b) / 2))
        out = compress(x, mid)
        if rel_l2_np(out.recon, x) <= target:
            a, best_b, best = float(np.log(mid)), mid, out
        else:
            b = float(np.log(mid))
    return best_b, best
