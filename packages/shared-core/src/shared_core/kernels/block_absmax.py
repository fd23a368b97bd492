"""Block-wise absolute maximum along the last dim, the scale statistic of block-scaled formats.

NVFP4, MXFP4 and their relatives split each row into blocks of 16 or 32 values and scale each block by
its absolute maximum; this reduction is the first pass of every such quantizer.
"""

from __future__ import annotations

import torch

from shared_core.kernels.backends import HAS_TRITON, autotune_configs, dispatch


def _check(x: torch.Tensor, block_size: int) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"block_absmax expects a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"block_absmax expects a floating-point tensor, got {x.dtype}")
    if not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be a positive int, got {block_size!r}")
    if x.ndim == 0 or x.shape[-1] % block_size:
        raise ValueError(
            f"the last dim of x (shape {tuple(x.shape)}) must be a multiple of block_size={block_size}; "
            "pad it first"
        )


def block_absmax_reference(x: torch.Tensor, block_size: int) -> torch.Tensor:
    """``max(|x|)`` over consecutive blocks of ``block_size`` in the last dim, in float32 (float64 for float64 input).

    Shape ``(..., n)`` gives ``(..., n // block_size)``. NaN propagates, as in ``torch.amax``.
    """
    blocks = x.to(torch.promote_types(x.dtype, torch.float32)).reshape(
        *x.shape[:-1], x.shape[-1] // block_size, block_size
    )
    return blocks.abs().amax(dim=-1)


if HAS_TRITON:
    import triton
    import triton.language as tl

    _CONFIGS = autotune_configs(
        [
            triton.Config({"ROWS": 64}, num_warps=4),
            triton.Config({"ROWS": 128}, num_warps=4),
            triton.Config({"ROWS": 256}, num_warps=8),
        ]
    )

    @triton.autotune(configs=_CONFIGS, key=["n_blocks", "BLOCK"])
    @triton.jit
    def _block_absmax_kernel(x_ptr, out_ptr, n_blocks, BLOCK: tl.constexpr, ROWS: tl.constexpr):
        rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
        cols = tl.arange(0, BLOCK)
        mask = rows[:, None] < n_blocks
        x = tl.load(x_ptr + rows[:, None] * BLOCK + cols[None, :], mask=mask, other=0.0)
        amax = tl.max(tl.abs(x), axis=1)  # exact in the input's own dtype
        tl.store(out_ptr + rows, amax.to(out_ptr.dtype.element_ty), mask=rows < n_blocks)

    def block_absmax_triton(x: torch.Tensor, block_size: int) -> torch.Tensor:
        """Triton twin of :func:`block_absmax_reference` (power-of-two ``block_size``)."""
        if block_size & (block_size - 1):
            raise ValueError(f"the triton kernel needs a power-of-two block_size, got {block_size}")
        flat = x.contiguous().reshape(-1, block_size)
        out_dtype = torch.promote_types(x.dtype, torch.float32)
        out = torch.empty(flat.shape[0], device=x.device, dtype=out_dtype)
        if flat.shape[0]:

            def grid(meta: dict) -> tuple[int]:
                return (triton.cdiv(flat.shape[0], meta["ROWS"]),)

            _block_absmax_kernel[grid](flat, out, flat.shape[0], BLOCK=block_size)
        return out.reshape(*x.shape[:-1], x.shape[-1] // block_size)

else:
    block_absmax_triton = None  # type: ignore[assignment]


def block_absmax(x: torch.Tensor, block_size: int, *, backend: str = "auto") -> torch.Tensor:
    """Absolute maximum of each block of ``block_size`` consecutive values in the last dim (float32)."""
    _check(x, block_size)
    return dispatch(backend, block_absmax_reference, block_absmax_triton, x)(x, block_size)
