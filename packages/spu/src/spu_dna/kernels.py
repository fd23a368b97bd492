"""The token-specific convolution with a triton forward kernel, dispatched through shared-core.

``token_conv(x, kernels, backend=...)``: ``"torch"`` is :func:`spu_dna.functional.token_conv_reference`;
``"triton"`` runs one program per (batch, position block, channel block) that accumulates the ``k``
taps in float32 registers, and differentiates through the reference twin in backward (recomputed, so
nothing extra is stored). ``"auto"`` takes the kernel on CUDA or under ``TRITON_INTERPRET=1``; an explicit
``"triton"`` that cannot run raises (shared-core's :func:`~shared_core.kernels.backends.dispatch`).
"""

from __future__ import annotations

from typing import Any

import torch

from shared_core.kernels.backends import HAS_TRITON, dispatch
from spu_dna.functional import check_kernel_shape, token_conv_reference

__all__ = ["token_conv"]

_kernel: Any = None

if HAS_TRITON:
    import triton
    import triton.language as tl

    @triton.jit
    def _token_conv_fwd(
        x_ptr,
        k_ptr,
        y_ptr,
        length,
        channels,
        groups,
        per_group,
        K: tl.constexpr,
        HALF: tl.constexpr,
        BLOCK_L: tl.constexpr,
        BLOCK_D: tl.constexpr,
    ):
        pid_b = tl.program_id(0)
        pid_l = tl.program_id(1)
        pid_d = tl.program_id(2)
        offs_l = pid_l * BLOCK_L + tl.arange(0, BLOCK_L)
        offs_d = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
        in_l = offs_l < length
        in_d = offs_d < channels
        group = offs_d // per_group
        x_base = x_ptr + pid_b * length * channels
        k_base = k_ptr + pid_b * length * groups * K
        acc = tl.zeros((BLOCK_L, BLOCK_D), dtype=tl.float32)
        for j in tl.static_range(K):
            src = offs_l + (j - HALF)
            ok = (src >= 0) & (src < length)
            xv = tl.load(
                x_base + src[:, None] * channels + offs_d[None, :],
                mask=(ok & in_l)[:, None] & in_d[None, :],
                other=0.0,
            )
            kv = tl.load(
                k_base + offs_l[:, None] * (groups * K) + group[None, :] * K + j,
                mask=in_l[:, None] & in_d[None, :],
                other=0.0,
            )
            acc += xv.to(tl.float32) * kv.to(tl.float32)
        out = y_ptr + pid_b * length * channels + offs_l[:, None] * channels + offs_d[None, :]
        tl.store(out, acc.to(y_ptr.dtype.element_ty), mask=in_l[:, None] & in_d[None, :])

    def _launch(x: torch.Tensor, kernels: torch.Tensor) -> torch.Tensor:
        b, length, d = x.shape
        groups, k = kernels.shape[-2:]
        x, kernels = x.contiguous(), kernels.contiguous()
        y = torch.empty_like(x)
        block_l, block_d = 32, min(64, triton.next_power_of_2(d))
        grid = (b, triton.cdiv(length, block_l), triton.cdiv(d, block_d))
        _token_conv_fwd[grid](
            x, kernels, y, length, d, groups, d // groups, K=k, HALF=k // 2,
            BLOCK_L=block_l, BLOCK_D=block_d,
        )  # fmt: skip
        return y

    class _TokenConv(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor, kernels: torch.Tensor) -> torch.Tensor:
            ctx.save_for_backward(x, kernels)
            return _launch(x, kernels)

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            # Differentiate the reference twin: the same maths, so the gradients are exact.
            x, kernels = ctx.saved_tensors
            with torch.enable_grad():
                x_, k_ = x.detach().requires_grad_(), kernels.detach().requires_grad_()
                gx, gk = torch.autograd.grad(token_conv_reference(x_, k_), (x_, k_), grad)
            return gx, gk

    def _token_conv_triton(x: torch.Tensor, kernels: torch.Tensor) -> torch.Tensor:
        check_kernel_shape(x, kernels)
        return _TokenConv.apply(x, kernels)

    _kernel = _token_conv_triton


def token_conv(x: torch.Tensor, kernels: torch.Tensor, *, backend: str = "auto") -> torch.Tensor:
    """Token-specific depthwise convolution (see :func:`~spu_dna.functional.token_conv_reference`)."""
    return dispatch(backend, token_conv_reference, _kernel, x, kernels)(x, kernels)
