"""The degree-5 PRISM step matrix ``T = I + R/2 + αR²`` in one kernel: the matmul ``R @ R`` with the
``I + R/2`` and per-matrix ``α`` fused into its epilogue, so α stays on the device and ``T`` is written once.

:func:`step_matrix_reference` is the pure-torch twin (the CPU path and the oracle); the triton kernel
runs on CUDA, or anywhere under ``TRITON_INTERPRET=1``, through shared-core's dispatch.
"""

from __future__ import annotations

import torch

from prism_matfn.inputs import _plain, square_symmetric
from shared_core.kernels import HAS_TRITON, autotune_configs, dispatch


def step_matrix_reference(
    R: torch.Tensor,
    alpha: torch.Tensor,
    symmetric: bool = True,
    squared: torch.Tensor | None = None,
) -> torch.Tensor:
    """``I + R/2 + α R²`` for ``R`` of shape ``(..., n, n)`` and ``alpha`` of shape ``(...)``.

    ``squared``: ``R²`` already computed (the α fit used it); it is overwritten with the result.
    """
    if squared is None:
        squared = square_symmetric(R) if symmetric else R @ R
    T = squared
    T.mul_(alpha.to(R.dtype)[..., None, None]).add_(R, alpha=0.5)
    T.diagonal(dim1=-2, dim2=-1).add_(1.0)
    return T


if HAS_TRITON:
    import triton
    import triton.language as tl

    _CONFIGS = autotune_configs(
        [
            triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=4, num_stages=3),
            triton.Config(
                {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=8, num_stages=3
            ),
            triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}, num_warps=2, num_stages=2),
        ]
    )

    @triton.autotune(configs=_CONFIGS, key=["N"])
    @triton.jit
    def _step_kernel(
        r_ptr,
        alpha_ptr,
        out_ptr,
        N,
        stride_rb,
        stride_rm,
        stride_rn,
        stride_ob,
        stride_om,
        stride_on,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr,
    ):
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        batch = tl.program_id(2)
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        ks = tl.arange(0, BLOCK_K)
        base = r_ptr + batch * stride_rb
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, N, BLOCK_K):
            kk = k0 + ks
            a = tl.load(
                base + rows[:, None] * stride_rm + kk[None, :] * stride_rn,
                mask=(rows[:, None] < N) & (kk[None, :] < N),
                other=0.0,
            )
            b = tl.load(
                base + kk[:, None] * stride_rm + cols[None, :] * stride_rn,
                mask=(kk[:, None] < N) & (cols[None, :] < N),
                other=0.0,
            )
            # "ieee": TF32 would make the GPU result drift from the float32 reference.
            acc += tl.dot(a, b, input_precision="ieee")
        mask = (rows[:, None] < N) & (cols[None, :] < N)
        r = tl.load(
            base + rows[:, None] * stride_rm + cols[None, :] * stride_rn, mask=mask, other=0.0
        )
        alpha = tl.load(alpha_ptr + batch)
        eye = tl.where(rows[:, None] == cols[None, :], 1.0, 0.0)
        out = alpha * acc + 0.5 * r.to(tl.float32) + eye
        obase = out_ptr + batch * stride_ob
        tl.store(
            obase + rows[:, None] * stride_om + cols[None, :] * stride_on,
            out.to(out_ptr.dtype.element_ty),
            mask=mask,
        )

    def step_matrix_triton(
        R: torch.Tensor, alpha: torch.Tensor, symmetric: bool = True
    ) -> torch.Tensor:
        """Triton twin of :func:`step_matrix_reference` (``symmetric`` only matters to the reference)."""
        lead, n = R.shape[:-2], R.shape[-1]
        Rb = R.reshape(-1, n, n)
        a = alpha.to(device=R.device, dtype=torch.float32).reshape(-1).contiguous()
        out = torch.empty_like(Rb)
        if Rb.shape[0] == 0 or n == 0:
            return out.reshape(*lead, n, n)

        def grid(meta: dict) -> tuple[int, int, int]:
            return (triton.cdiv(n, meta["BLOCK_M"]), triton.cdiv(n, meta["BLOCK_N"]), Rb.shape[0])

        _step_kernel[grid](Rb, a, out, n, *Rb.stride(), *out.stride())
        return out.reshape(*lead, n, n)

else:
    step_matrix_triton = None  # type: ignore[assignment]


def step_matrix(
    R: torch.Tensor,
    alpha: torch.Tensor,
    symmetric: bool = True,
    *,
    squared: torch.Tensor | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """``I + R/2 + α R²`` batched over leading dims; ``backend`` is ``"auto" | "torch" | "triton"``.

    float64 always takes the reference (the kernel accumulates in float32). With ``squared`` (``R²``,
    overwritten) there is nothing left to fuse: ``"auto"`` takes the reference's element-wise passes
    (an explicit backend ignores it and squares again).
    """
    if backend == "auto" and (squared is not None or _plain(R)):
        return step_matrix_reference(R, alpha, symmetric, squared)
    if R.dtype == torch.float64:
        backend = "torch"
    return dispatch(backend, step_matrix_reference, step_matrix_triton, R)(R, alpha, symmetric)
