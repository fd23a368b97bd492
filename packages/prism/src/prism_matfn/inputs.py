"""Input checks and the scale-safe normalisation shared by PRISM and the baselines."""

from __future__ import annotations

import warnings

import torch

from shared_core.kernels import gram
from shared_core.kernels.backends import interpreting


def _plain(X: torch.Tensor) -> bool:
    """float64, or a CPU tensor outside the triton interpreter: a plain matmul, no dispatch (its
    per-call overhead is a third of a small PRISM step on the CPU)."""
    return X.dtype == torch.float64 or (not X.is_cuda and not interpreting())


def prepare(
    A: object, name: str, compute_dtype: torch.dtype | None, check_finite: bool
) -> tuple[torch.Tensor, torch.dtype]:
    """Validate ``A`` and cast it to the compute dtype; return it with the dtype the result goes back to.

    ``compute_dtype=None`` keeps float64 and computes everything else (half precision, integers) in
    float32. Integer input comes back as float32.
    """
    if not isinstance(A, torch.Tensor):
        raise TypeError(
            f"{name} expects a torch.Tensor, got {type(A).__name__}; wrap arrays with torch.as_tensor"
        )
    if A.is_complex():
        raise TypeError(f"{name} supports real matrices only, got dtype {A.dtype}")
    if A.ndim < 2:
        raise ValueError(
            f"{name} expects a matrix or batch of matrices, got shape {tuple(A.shape)}"
        )
    if compute_dtype is None:
        compute_dtype = torch.float64 if A.dtype == torch.float64 else torch.float32
    if not compute_dtype.is_floating_point:
        raise TypeError(f"compute_dtype must be a floating dtype, got {compute_dtype}")
    if check_finite and A.numel() and not bool(torch.isfinite(A).all()):
        raise ValueError(
            f"{name} got NaN or Inf entries (pass check_finite=False to skip this check)"
        )
    out_dtype = A.dtype if A.is_floating_point() else torch.float32
    return A.to(compute_dtype), out_dtype


def check_square(A: torch.Tensor, name: str) -> None:
    """Raise ``ValueError`` naming ``A``'s shape unless its last two dims are equal."""
    if A.shape[-1] != A.shape[-2]:
        raise ValueError(f"{name} expects square matrices, got shape {tuple(A.shape)}")


def safe_frobenius_normalize(
    X: torch.Tensor, name: str, warn: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """``X / ‖X‖_F`` per matrix without under- or overflow, and ``‖X‖_F``.

    Dividing by the largest entry first keeps norms near 1e-30 (or 1e30) exact: an ``eps`` added to the
    norm, as Muon does, silently returns a tiny non-orthogonal matrix when ``‖X‖_F < eps``. All-zero
    matrices give zeros and (with ``warn``, which costs a host synchronisation) a ``RuntimeWarning``,
    never NaN. Half-precision input is normalised in float32 (the sum of squares would overflow
    float16) and returned in its own dtype.
    """
    if X.dtype in (torch.float16, torch.bfloat16):
        Y, norm = safe_frobenius_normalize(X.float(), name, warn)
        return Y.to(X.dtype), norm
    peak = X.abs().amax(dim=(-2, -1), keepdim=True)
    zero = peak == 0
    if warn and bool(zero.any()):
        warnings.warn(
            f"{name}: all-zero input matrix, returning zeros", RuntimeWarning, stacklevel=3
        )
    peak = torch.where(zero, torch.ones_like(peak), peak)
    Y = X / peak
    norm = torch.linalg.matrix_norm(Y, keepdim=True)
    norm = torch.where(zero, torch.ones_like(norm), norm)
    return Y / norm, norm * peak * (~zero)


def gram_t(X: torch.Tensor) -> torch.Tensor:
    """``Xᵀ X`` over the last two dims: shared-core's :func:`~shared_core.kernels.gram` (half the flops,
    triton on GPU), except float64, whose plain matmul keeps float64 on every device (shared-core's
    triton kernel accumulates in float32; its CPU reference would keep float64 too)."""
    if _plain(X):
        return X.mT @ X
    return gram(X.mT)


def square_symmetric(R: torch.Tensor) -> torch.Tensor:
    """``R @ R`` for a symmetric ``R`` (``gram(R) = R Rᵀ = R²``); float64 as in :func:`gram_t`."""
    if R.dtype == torch.float64:
        return R @ R
    if _plain(R):
        return R @ R.mT  # gram's own reference, without the dispatch
    return gram(R)


def identity_like(X: torch.Tensor, n: int) -> torch.Tensor:
    """The ``n×n`` identity in ``X``'s dtype and device, broadcast over ``X``'s batch dims (a view)."""
    return torch.eye(n, dtype=X.dtype, device=X.device).expand(*X.shape[:-2], n, n)
