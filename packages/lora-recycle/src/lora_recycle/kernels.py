"""``(x A_catᵀ) ⊙ m · B_catᵀ``: the concatenated-experts product, in torch and as a triton kernel pair.

The triton path is punica/BGMV style: a *shrink* kernel computes ``h = (x A_catᵀ) ⊙ m`` with the
coefficients fused into its epilogue, an *expand* kernel ``h B_catᵀ``. It runs the forward pass; the
backward pass is three GEMMs in torch from the saved ``x A_catᵀ``. Choice of backend goes through
shared-core's dispatch: an explicit ``backend="triton"`` that cannot run raises.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from shared_core.kernels.backends import HAS_TRITON, autotune_configs, dispatch


def lora_cat_reference(
    x: torch.Tensor, a: torch.Tensor, m: torch.Tensor, b: torch.Tensor
) -> torch.Tensor:
    """``((x Aᵀ) ⊙ m) Bᵀ`` for ``x: (..., in)``, ``A: R×in``, ``m: R``, ``B: out×R``."""
    return F.linear(F.linear(x, a) * m, b)


if HAS_TRITON:
    import triton
    import triton.language as tl

    _SHRINK_CONFIGS = autotune_configs(
        [
            triton.Config({"BT": 32, "BR": 32, "BK": 32}, num_warps=4),
            triton.Config({"BT": 64, "BR": 64, "BK": 64}, num_warps=4),
            triton.Config({"BT": 128, "BR": 64, "BK": 32}, num_warps=8),
        ]
    )
    _EXPAND_CONFIGS = autotune_configs(
        [
            triton.Config({"BT": 32, "BO": 32, "BK": 32}, num_warps=4),
            triton.Config({"BT": 64, "BO": 64, "BK": 64}, num_warps=4),
            triton.Config({"BT": 128, "BO": 128, "BK": 32}, num_warps=8),
        ]
    )

    @triton.autotune(configs=_SHRINK_CONFIGS, key=["T", "R", "K"])
    @triton.jit
    def _shrink_kernel(
        x_ptr,
        a_ptr,
        m_ptr,
        h_ptr,
        hm_ptr,
        T,
        R,
        K,
        BT: tl.constexpr,
        BR: tl.constexpr,
        BK: tl.constexpr,
    ):
        rows = tl.program_id(0) * BT + tl.arange(0, BT)
        cols = tl.program_id(1) * BR + tl.arange(0, BR)
        acc = tl.zeros((BT, BR), dtype=tl.float32)
        for k0 in range(0, K, BK):
            ks = k0 + tl.arange(0, BK)
            x = tl.load(
                x_ptr + rows[:, None] * K + ks[None, :],
                mask=(rows[:, None] < T) & (ks[None, :] < K),
                other=0.0,
            )
            a = tl.load(
                a_ptr + cols[None, :] * K + ks[:, None],
                mask=(cols[None, :] < R) & (ks[:, None] < K),
                other=0.0,
            )
            acc += tl.dot(x, a)
        m = tl.load(m_ptr + cols, mask=cols < R, other=0.0).to(tl.float32)
        mask = (rows[:, None] < T) & (cols[None, :] < R)
        offs = rows[:, None] * R + cols[None, :]
        tl.store(h_ptr + offs, acc.to(h_ptr.dtype.element_ty), mask=mask)
        tl.store(hm_ptr + offs, (acc * m[None, :]).to(hm_ptr.dtype.element_ty), mask=mask)

    @triton.autotune(configs=_EXPAND_CONFIGS, key=["T", "O", "R"])
    @triton.jit
    def _expand_kernel(
        h_ptr, b_ptr, y_ptr, T, O, R, BT: tl.constexpr, BO: tl.constexpr, BK: tl.constexpr
    ):
        rows = tl.program_id(0) * BT + tl.arange(0, BT)
        cols = tl.program_id(1) * BO + tl.arange(0, BO)
        acc = tl.zeros((BT, BO), dtype=tl.float32)
        for k0 in range(0, R, BK):
            ks = k0 + tl.arange(0, BK)
            h = tl.load(
                h_ptr + rows[:, None] * R + ks[None, :],
                mask=(rows[:, None] < T) & (ks[None, :] < R),
                other=0.0,
            )
            b = tl.load(
                b_ptr + cols[None, :] * R + ks[:, None],
                mask=(cols[None, :] < O) & (ks[:, None] < R),
                other=0.0,
            )
            acc += tl.dot(h, b)
        mask = (rows[:, None] < T) & (cols[None, :] < O)
        tl.store(
            y_ptr + rows[:, None] * O + cols[None, :], acc.to(y_ptr.dtype.element_ty), mask=mask
        )

    def _launch(
        x2: torch.Tensor, a: torch.Tensor, m: torch.Tensor, b: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        t, k = x2.shape
        r, o = a.shape[0], b.shape[0]
        h = torch.empty(t, r, device=x2.device, dtype=x2.dtype)
        hm = torch.empty_like(h)
        y = torch.empty(t, o, device=x2.device, dtype=x2.dtype)
        if t and r:

            def shrink_grid(meta: dict) -> tuple[int, int]:
                return (triton.cdiv(t, meta["BT"]), triton.cdiv(r, meta["BR"]))

            def expand_grid(meta: dict) -> tuple[int, int]:
                return (triton.cdiv(t, meta["BT"]), triton.cdiv(o, meta["BO"]))

            _shrink_kernel[shrink_grid](x2, a, m, h, hm, t, r, k)
            _expand_kernel[expand_grid](hm, b, y, t, o, r)
        else:
            y.zero_()
        return h, y

    class _LoraCatFunction(torch.autograd.Function):
        @staticmethod
        def forward(
            ctx: Any, x: torch.Tensor, a: torch.Tensor, m: torch.Tensor, b: torch.Tensor
        ) -> torch.Tensor:
            x2 = x.reshape(-1, x.shape[-1]).contiguous()
            h, y = _launch(x2, a.contiguous(), m.contiguous(), b.contiguous())
            ctx.save_for_backward(x2, a, m, b, h)
            ctx.x_shape = x.shape
            return y.reshape(*x.shape[:-1], b.shape[0])

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
            # Only the gradients autograd asks for: A_cat and B_cat are frozen buffers in every preset
            # but π-Tuning, and their two GEMMs are as large as the rest of the backward together.
            x2, a, m, b, h = ctx.saved_tensors
            need_x, need_a, need_m, need_b = ctx.needs_input_grad
            g = grad.reshape(-1, b.shape[0])
            grad_x = grad_a = grad_m = grad_b = None
            if need_b:
                grad_b = g.t() @ (h * m)
            if need_x or need_a or need_m:
                gb = g @ b  # (T, R): gradient w.r.t. h ⊙ m
                if need_m:
                    grad_m = (gb * h).sum(0)
                gh = gb * m
                if need_a:
                    grad_a = gh.t() @ x2
                if need_x:
                    grad_x = (gh @ a).reshape(ctx.x_shape)
            return grad_x, grad_a, grad_m, grad_b

    def lora_cat_triton(
        x: torch.Tensor, a: torch.Tensor, m: torch.Tensor, b: torch.Tensor
    ) -> torch.Tensor:
        """Triton twin of :func:`lora_cat_reference` (differentiable)."""
        return _LoraCatFunction.apply(x, a, m, b)

else:
    lora_cat_triton = None  # type: ignore[assignment]


def lora_cat_forward(
    x: torch.Tensor, a: torch.Tensor, m: torch.Tensor, b: torch.Tensor, *, backend: str = "auto"
) -> torch.Tensor:
    """``((x Aᵀ) ⊙ m) Bᵀ`` through the backend ``backend`` resolves to (see shared-core dispatch)."""
    if a.ndim != 2 or b.ndim != 2 or m.shape != (a.shape[0],) or b.shape[1] != a.shape[0]:
        raise ValueError(
            f"need A: R×in, m: (R,), B: out×R; got A {tuple(a.shape)}, m {tuple(m.shape)}, B {tuple(b.shape)}"
        )
    if x.shape[-1] != a.shape[1]:
        raise ValueError(f"x has {x.shape[-1]} features, A_cat expects {a.shape[1]}")
    return dispatch(backend, lora_cat_reference, lora_cat_triton, x, a, m, b)(x, a, m, b)
