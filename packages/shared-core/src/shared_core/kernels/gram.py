"""Batched Gram product ``X @ X.mT``, the workhorse of Newton–Schulz-type iterations.

The result is symmetric, so the kernel computes only the tiles on and above the diagonal and writes each
off-diagonal tile twice: half the multiply-adds of a general matmul. ``gram(A)`` of a symmetric ``A``
is ``A @ A``, so the same op serves the ``A²`` term of polynomial iterations.
"""

from __future__ import annotations

import torch

from shared_core.kernels.backends import HAS_TRITON, autotune_configs, dispatch


def gram_reference(x: torch.Tensor) -> torch.Tensor:
    """``x @ x.mT`` over the last two dims, accumulated in at least float32, returned in ``x.dtype``."""
    acc = x.to(torch.promote_types(x.dtype, torch.float32))
    return (acc @ acc.mT).to(x.dtype)


def _check(x: torch.Tensor) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"gram expects a torch.Tensor, got {type(x).__name__}")
    if x.ndim < 2:
        raise ValueError(
            f"gram expects a matrix or a batch of matrices, got shape {tuple(x.shape)}"
        )
    if not x.is_floating_point():
        raise TypeError(f"gram expects a floating-point tensor, got {x.dtype}")


if HAS_TRITON:
    import triton
    import triton.language as tl

    _CONFIGS = autotune_configs(
        [
            triton.Config({"BLOCK_M": 64, "BLOCK_K": 32}, num_warps=4, num_stages=3),
            triton.Config({"BLOCK_M": 128, "BLOCK_K": 32}, num_warps=8, num_stages=3),
            triton.Config({"BLOCK_M": 64, "BLOCK_K": 64}, num_warps=4, num_stages=4),
            triton.Config({"BLOCK_M": 32, "BLOCK_K": 32}, num_warps=2, num_stages=2),
        ]
    )

    @triton.autotune(configs=_CONFIGS, key=["M", "K"])
    @triton.jit
    def _gram_kernel(
        x_ptr,
        out_ptr,
        M,
        K,
        stride_xb,
        stride_xm,
        stride_xk,
        stride_ob,
        stride_om,
        stride_on,
        BLOCK_M: tl.constexpr,
        BLOCK_K: tl.constexpr,
    ):
        pid_i = tl.program_id(0)
        pid_j = tl.program_id(1)
        batch = tl.program_id(2)
        if pid_j < pid_i:  # the lower triangle is the mirror of the upper one
            return
        rows_i = pid_i * BLOCK_M + tl.arange(0, BLOCK_M)
        rows_j = pid_j * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = tl.arange(0, BLOCK_K)
        base = x_ptr + batch * stride_xb
        acc = tl.zeros((BLOCK_M, BLOCK_M), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            kk = k0 + cols
            a = tl.load(
                base + rows_i[:, None] * stride_xm + kk[None, :] * stride_xk,
                mask=(rows_i[:, None] < M) & (kk[None, :] < K),
                other=0.0,
            )
            b = tl.load(
                base + rows_j[None, :] * stride_xm + kk[:, None] * stride_xk,
                mask=(rows_j[None, :] < M) & (kk[:, None] < K),
                other=0.0,
            )
            # "ieee" keeps float32 products exact; TF32 would make GPU results differ from the oracle.
            acc += tl.dot(a, b, input_precision="ieee")
        out = acc.to(out_ptr.dtype.element_ty)
        mask = (rows_i[:, None] < M) & (rows_j[None, :] < M)
        obase = out_ptr + batch * stride_ob
        tl.store(obase + rows_i[:, None] * stride_om + rows_j[None, :] * stride_on, out, mask=mask)
        if pid_j != pid_i:
            tl.store(
                obase + rows_j[None, :] * stride_om + rows_i[:, None] * stride_on, out, mask=mask
            )

    def gram_triton(x: torch.Tensor) -> torch.Tensor:
        """Triton twin of :func:`gram_reference`."""
        lead = x.shape[:-2]
        m, k = x.shape[-2:]
        xb = x.reshape(-1, m, k)
        out = torch.empty((xb.shape[0], m, m), device=x.device, dtype=x.dtype)
        if xb.shape[0] == 0 or m == 0:
            return out.reshape(*lead, m, m)
        if k == 0:
            return out.zero_().reshape(*lead, m, m)

        def grid(meta: dict) -> tuple[int, int, int]:
            tiles = triton.cdiv(m, meta["BLOCK_M"])
            return (tiles, tiles, xb.shape[0])

        _gram_kernel[grid](xb, out, m, k, *xb.stride(), *out.stride())
        return out.reshape(*lead, m, m)

else:
    gram_triton = None  # type: ignore[assignment]


def gram(x: torch.Tensor, *, backend: str = "auto") -> torch.Tensor:
    """Symmetric product ``x @ x.mT`` over the last two dims, batched over the leading ones.

    Accumulates in float32 and returns ``x.dtype``. ``backend`` is ``"auto"``, ``"torch"`` or
    ``"triton"`` (see :func:`shared_core.kernels.resolve_backend`).
    """
    _check(x)
    return dispatch(backend, gram_reference, gram_triton, x)(x)
