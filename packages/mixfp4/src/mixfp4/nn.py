"""Model-level quantization in torchao's style: ``quantize_(model, Config())``.

``MixFP4Linear`` stores its weight packed (codes, scale bytes, tensor scale as buffers, so a
``state_dict`` holds exactly the bits) and computes ``F.linear(act(x), dequantize(W), b)``, where
``act`` is the identity (weight-only, W4A16) or dynamic fake quantization of the activations along K
(W4A4: per-16 blocks, tensor scale from the current batch's amax).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from mixfp4.fake_quant import fake_quantize
from mixfp4.packed import FMTS, MX4Packed
from mixfp4.quantize import dequantize, quantize

__all__ = [
    "MixFP4DynamicActivationMixFP4WeightConfig",
    "MixFP4Linear",
    "MixFP4WeightOnlyConfig",
    "quantize_",
]


@dataclasses.dataclass(frozen=True)
class MixFP4WeightOnlyConfig:
    """Weight-only (W4A16) quantization of every selected ``nn.Linear``.

    ``fmt`` picks the format (``"mixfp4"``, or the baselines ``"nvfp4"`` / ``"mxfp4"``);
    ``weight_kwargs`` go to the quantizer (e.g. ``{"e1m2_mode": "frac"}``). ``selector`` applies to
    MixFP4 only.
    """

    fmt: str = "mixfp4"
    selector: str = "mse"
    weight_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.fmt not in FMTS:
            raise ValueError(f"fmt must be one of {FMTS}, got {self.fmt!r}")

    def weight_quant_kwargs(self) -> dict[str, Any]:
        kwargs = dict(self.weight_kwargs)
        if self.fmt == "mixfp4":
            kwargs.setdefault("selector", self.selector)
        return kwargs

    def activation(self) -> tuple[str, dict[str, Any]] | None:
        return None


@dataclasses.dataclass(frozen=True)
class MixFP4DynamicActivationMixFP4WeightConfig(MixFP4WeightOnlyConfig):
    """W4A4: packed weights, and activations fake-quantized per 16 along K on every forward.

    ``act_fmt`` defaults to ``fmt``; the activation tensor scale is dynamic (this batch's amax)
    unless ``act_kwargs`` holds a calibrated ``tensor_scale``.
    """

    act_fmt: str | None = None
    act_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.act_fmt is not None and self.act_fmt not in FMTS:
            raise ValueError(f"act_fmt must be one of {FMTS}, got {self.act_fmt!r}")

    def activation(self) -> tuple[str, dict[str, Any]] | None:
        fmt = self.act_fmt or self.fmt
        kwargs = dict(self.act_kwargs)
        if fmt == "mixfp4":
            kwargs.setdefault("selector", self.selector)
        return fmt, kwargs


class MixFP4Linear(nn.Module):
    """A linear layer whose weight lives as an :class:`~mixfp4.packed.MX4Packed`.

    Buffers ``weight_codes`` (uint8), ``weight_scales`` (uint8) and ``weight_tensor_scale``
    (float32) are the packed bits; :attr:`weight` decodes them. Not an ``nn.Linear`` subclass on
    purpose: code that walks ``nn.Linear`` modules (including :func:`quantize_`) must not treat it
    as a float layer.
    """

    weight_codes: torch.Tensor
    weight_scales: torch.Tensor
    weight_tensor_scale: torch.Tensor
    act: tuple[str, dict[str, Any]] | None

    def __init__(
        self,
        packed: MX4Packed,
        bias: torch.Tensor | None = None,
        *,
        act: tuple[str, dict[str, Any]] | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        if len(packed.shape) != 2:
            raise ValueError(f"a linear weight must be 2-D, got shape {packed.shape}")
        self.out_features, self.in_features = packed.shape
        self.block_size = packed.block_size
        self.fmt = packed.fmt
        self.e1m2_mode = packed.e1m2_mode
        self.act = act
        self.dtype = dtype
        self.register_buffer("weight_codes", packed.codes)
        self.register_buffer("weight_scales", packed.scales)
        self.register_buffer("weight_tensor_scale", packed.tensor_scale.reshape(()).float())
        self.bias = nn.Parameter(bias.detach().clone()) if bias is not None else None

    @classmethod
    def from_linear(
        cls, linear: nn.Linear, config: MixFP4WeightOnlyConfig | None = None
    ) -> MixFP4Linear:
        """Quantize ``linear.weight`` (rows = output features, K = input features)."""
        config = config or MixFP4WeightOnlyConfig()
        packed = quantize(linear.weight.detach(), config.fmt, **config.weight_quant_kwargs())
        return cls(packed, linear.bias, act=config.activation(), dtype=linear.weight.dtype)

    @property
    def packed(self) -> MX4Packed:
        return MX4Packed(
            codes=self.weight_codes,
            scales=self.weight_scales,
            tensor_scale=self.weight_tensor_scale,
            shape=(self.out_features, self.in_features),
            block_size=self.block_size,
            fmt=self.fmt,
            e1m2_mode=self.e1m2_mode,
        )

    @property
    def weight(self) -> torch.Tensor:
        """The decoded weight ``[out_features, in_features]``."""
        return dequantize(self.packed, self.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight.to(x.dtype)
        if self.act is not None:
            fmt, kwargs = self.act
            x = fake_quantize(x, fmt, **kwargs)
        bias = None if self.bias is None else self.bias.to(x.dtype)
        return nn.functional.linear(x, w, bias)

    def extra_repr(self) -> str:
        act = "none" if self.act is None else self.act[0]
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"fmt={self.fmt}, act={act}, bias={self.bias is not None}"
        )


def _default_filter(module: nn.Module, fqn: str) -> bool:
    return isinstance(module, nn.Linear)


def quantize_(
    model: nn.Module,
    config: MixFP4WeightOnlyConfig | None = None,
    filter_fn: Callable[[nn.Module, str], bool] | None = None,
) -> nn.Module:
    """Replace, in place, every ``nn.Linear`` that ``filter_fn(module, fqn)`` accepts by a
    :class:`MixFP4Linear` built with ``config``; return ``model``.

    The default filter takes every ``nn.Linear``. Layers are quantized along their input features
    (the GEMM's K); an input width that is not a multiple of the block size is zero-padded.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    config = config or MixFP4WeightOnlyConfig()
    if not isinstance(config, MixFP4WeightOnlyConfig):
        raise TypeError(f"config must be a MixFP4 config, got {type(config).__name__}")
    keep = filter_fn or _default_filter
    targets = [
        (fqn, m)
        for fqn, m in model.named_modules()
        if fqn and isinstance(m, nn.Linear) and keep(m, fqn)
    ]
    for fqn, linear in targets:
        parent_name, _, child = fqn.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, MixFP4Linear.from_linear(linear, config))
    return model
