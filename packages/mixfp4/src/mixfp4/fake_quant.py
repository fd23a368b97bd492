"""Fake quantization (quantize then dequantize) with a straight-through gradient, for QAT."""

from __future__ import annotations

from typing import Any

import torch

from mixfp4.quantizers import dequantize, quantize


class _STE(torch.autograd.Function):
    """Forward: the fake-quantized tensor. Backward: the incoming gradient unchanged (STE)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, xq: torch.Tensor) -> torch.Tensor:
        return xq

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None


def fake_quantize(
    x: torch.Tensor, fmt: str = "mixfp4", *, ste: bool = True, **kwargs: Any
) -> torch.Tensor:
    """``dequantize(quantize(x, fmt, **kwargs))`` in ``x``'s dtype and shape.

    With ``ste=True`` the gradient with respect to ``x`` is the identity (straight-through
    estimator, as in torchao/ModelOpt QAT); with ``ste=False`` the result carries no gradient.
    ``kwargs`` go to :func:`mixfp4.quantize_mixfp4` / ``quantize_nvfp4`` / ``quantize_mxfp4``;
    ``nan_policy="propagate"`` also lets NaN blocks decode to NaN.
    """
    nan_policy = kwargs.get("nan_policy", "raise")
    xq = dequantize(quantize(x, fmt, **kwargs), x.dtype, nan_policy=nan_policy)
    if ste and x.requires_grad:
        return _STE.apply(x, xq)
    return xq
