"""Model-level quantization in torchao's style: ``quantize_(model, Config())``.

``MixFP4Linear`` is an ``nn.Linear`` whose ``weight`` parameter holds the packed codes (uint8, frozen),
with the scale bytes and the raw bits of the FP32 tensor scale as integer buffers: a module cast
(``.to(torch.bfloat16)``, ``.half()``) only touches floating-point tensors, so it cannot change a
quantized bit, and a ``state_dict`` holds exactly the bits. It computes ``F.linear(act(x), Ŵ, b)``,
where ``Ŵ`` is the decoded weight and ``act`` is the identity (weight-only, W4A16) or dynamic fake
quantization of the activations along K (W4A4: per-16 blocks, tensor scale from the batch's amax).

``MixFP4QATLinear`` is the quantization-aware-training twin: a float ``nn.Linear`` whose forward
fake-quantizes its weight (and, for W4A4, its input) with the straight-through estimator;
``quantize_(model, MixFP4WeightOnlyConfig())`` afterwards packs the trained weights.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from mixfp4.fake_quant import fake_quantize
from mixfp4.packed import E1M2_MODES, FMTS, TENSOR_SCALE_CONVENTIONS, MX4Packed
from mixfp4.quantizers import SELECTORS, dequantize, quantize

__all__ = [
    "MixFP4DynamicActivationMixFP4WeightConfig",
    "MixFP4Linear",
    "MixFP4QATConfig",
    "MixFP4QATLinear",
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
        if self.selector not in SELECTORS:
            raise ValueError(f"selector must be one of {SELECTORS}, got {self.selector!r}")

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


def _scale_bits(tensor_scale: torch.Tensor) -> torch.Tensor:
    """The FP32 tensor scale as its int32 bit pattern (immune to floating-point module casts)."""
    return tensor_scale.detach().reshape(()).to(torch.float32).clone().view(torch.int32)


# What the bytes of a MixFP4Linear mean beyond the bytes themselves, in the order of the int32
# ``weight_layout`` buffer: a state_dict records it, so loading one into a layer that would read
# the bytes differently raises instead of decoding garbage (a divisor scale read as a multiplier
# is off by s_t², e.g. 1.85e9).
_LAYOUT_FIELDS = ("fmt", "block_size", "block_rows", "e1m2_mode", "tensor_scale_convention")
_LAYOUT_CODES: dict[str, tuple[str, ...]] = {
    "fmt": FMTS,
    "e1m2_mode": E1M2_MODES,
    "tensor_scale_convention": TENSOR_SCALE_CONVENTIONS,
}
# state_dicts written before the layout was recorded hold 1-D blocks in the multiplier convention;
# fmt, block size and e1m2_mode were not recorded, so the layer's own are taken (as before).
_LEGACY_LAYOUT = {"block_rows": 1, "tensor_scale_convention": "multiplier"}


def _encode_layout(layout: dict[str, Any]) -> torch.Tensor:
    values = [
        _LAYOUT_CODES[f].index(layout[f]) if f in _LAYOUT_CODES else int(layout[f])
        for f in _LAYOUT_FIELDS
    ]
    return torch.tensor(values, dtype=torch.int32)


def _decode_layout(encoded: torch.Tensor) -> dict[str, Any]:
    values = [int(v) for v in encoded.reshape(-1).tolist()]
    if len(values) != len(_LAYOUT_FIELDS):
        raise ValueError(
            f"weight_layout must hold {len(_LAYOUT_FIELDS)} values {_LAYOUT_FIELDS}, got {values}"
        )
    out: dict[str, Any] = {}
    for field, v in zip(_LAYOUT_FIELDS, values, strict=True):
        codes = _LAYOUT_CODES.get(field)
        if codes is not None and not 0 <= v < len(codes):
            raise ValueError(f"weight_layout: {field} code {v} is not one of 0..{len(codes) - 1}")
        out[field] = codes[v] if codes is not None else v
    return out


class MixFP4Linear(nn.Linear):
    """An ``nn.Linear`` whose weight lives as an :class:`~mixfp4.packed.MX4Packed`.

    ``weight`` is a frozen uint8 parameter of the packed codes ``[out_features, K_pad / 2]`` (as
    bitsandbytes' 4-bit layers keep theirs); buffers ``weight_scales`` (uint8 scale bytes) and
    ``weight_tensor_scale_bits`` (int32: the FP32 tensor scale's bits) complete it.
    :meth:`dequantize_weight` decodes, :attr:`packed` gives the container. ``bias`` stays a float
    parameter and follows module casts as usual.
    """

    weight_scales: torch.Tensor
    weight_tensor_scale_bits: torch.Tensor
    weight_layout: torch.Tensor
    act: tuple[str, dict[str, Any]] | None

    def __init__(
        self,
        packed: MX4Packed,
        bias: torch.Tensor | None = None,
        *,
        act: tuple[str, dict[str, Any]] | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        # nn.Linear.__init__ would allocate (and initialise) a float weight only to drop it.
        nn.Module.__init__(self)
        if not isinstance(packed, MX4Packed):
            raise TypeError(f"packed must be an MX4Packed, got {type(packed).__name__}")
        if len(packed.shape) != 2:
            raise ValueError(f"a linear weight must be 2-D, got shape {packed.shape}")
        self.out_features, self.in_features = packed.shape
        self.block_size = packed.block_size
        self.fmt = packed.fmt
        self.e1m2_mode = packed.e1m2_mode
        self.block_rows = packed.block_rows
        self.tensor_scale_convention = packed.tensor_scale_convention
        self.act = act
        self.dtype = dtype
        self.weight = nn.Parameter(packed.codes, requires_grad=False)
        self.register_buffer("weight_scales", packed.scales)
        self.register_buffer("weight_tensor_scale_bits", _scale_bits(packed.tensor_scale))
        self.register_buffer("weight_layout", _encode_layout(self.layout))
        # nn.Linear types bias as a Parameter but sets it to None without bias, as here.
        self.bias = nn.Parameter(bias.detach().clone()) if bias is not None else None  # type: ignore[assignment]

    @classmethod
    def from_linear(
        cls, linear: nn.Linear, config: MixFP4WeightOnlyConfig | None = None
    ) -> MixFP4Linear:
        """Quantize ``linear.weight`` (rows = output features, K = input features)."""
        config = config or MixFP4WeightOnlyConfig()
        packed = quantize(linear.weight.detach(), config.fmt, **config.weight_quant_kwargs())
        return cls(packed, linear.bias, act=config.activation(), dtype=linear.weight.dtype)

    @property
    def layout(self) -> dict[str, Any]:
        """How the bytes are read: ``fmt``, ``block_size``, ``block_rows``, ``e1m2_mode`` and
        ``tensor_scale_convention`` (recorded in the ``weight_layout`` buffer of a state_dict)."""
        return {f: getattr(self, f) for f in _LAYOUT_FIELDS}

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ) -> None:
        # Checked before any tensor is copied, so a refused load leaves the layer as it was.
        key = f"{prefix}weight_layout"
        mine = self.layout
        if key in state_dict:
            saved = _decode_layout(state_dict[key])
        else:
            saved = {**mine, **_LEGACY_LAYOUT}
            state_dict = {**state_dict, key: self.weight_layout}
        diff = [f"{f}={saved[f]!r} (this layer: {mine[f]!r})" for f in mine if saved[f] != mine[f]]
        if diff:
            raise ValueError(
                f"layer {prefix.rstrip('.') or '(root)'!r}: the state_dict's weight was quantized with "
                + ", ".join(diff)
                + "; its bytes would decode wrongly here: build the layer with the same settings "
                "(MixFP4WeightOnlyConfig(fmt=..., weight_kwargs=...))"
            )
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )

    @property
    def packed(self) -> MX4Packed:
        kinds = {
            "weight": (self.weight, torch.uint8),
            "weight_scales": (self.weight_scales, torch.uint8),
            "weight_tensor_scale_bits": (self.weight_tensor_scale_bits, torch.int32),
        }
        cast = {k: t.dtype for k, (t, want) in kinds.items() if t.dtype != want}
        if cast:
            # Module.type(dtype) casts integer tensors too (.to/.half/.float do not): the int32 bits
            # of the tensor scale become a number, and the scale is lost.
            raise TypeError(
                f"this MixFP4Linear's packed tensors were cast ({cast}; expected uint8 codes and "
                "scale bytes, int32 tensor-scale bits), as Module.type(dtype) does: the tensor "
                "scale is lost; use .to(dtype)/.half() on quantized models, and reload the "
                "state_dict or re-quantize this one"
            )
        return MX4Packed(
            codes=self.weight.detach(),
            scales=self.weight_scales,
            tensor_scale=self.weight_tensor_scale_bits.view(torch.float32),
            shape=(self.out_features, self.in_features),
            block_size=self.block_size,
            fmt=self.fmt,
            e1m2_mode=self.e1m2_mode,
            block_rows=self.block_rows,
            tensor_scale_convention=self.tensor_scale_convention,
        )

    def reset_parameters(self) -> None:
        """Refuse: initialisers written for float ``nn.Linear`` weights would scribble on the codes."""
        raise RuntimeError(
            "a MixFP4Linear holds packed uint8 codes and cannot be re-initialised; initialise the "
            "float model before mixfp4.quantize_"
        )

    def dequantize_weight(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        """The decoded weight ``[out_features, in_features]`` (default: the original weight's dtype)."""
        return dequantize(self.packed, dtype or self.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            # as nn.Linear refuses them: decoding the weight to an integer dtype would truncate it
            raise TypeError(
                "MixFP4Linear expects a floating-point input, got "
                f"{x.dtype if isinstance(x, torch.Tensor) else type(x).__name__}"
            )
        w = self.dequantize_weight(x.dtype)
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


@dataclasses.dataclass(frozen=True)
class MixFP4QATConfig(MixFP4DynamicActivationMixFP4WeightConfig):
    """Quantization-aware training: swap each ``nn.Linear`` for a :class:`MixFP4QATLinear`.

    ``quantize_activations=False`` fake-quantizes the weight only (W4A16 QAT).
    """

    quantize_activations: bool = True

    def activation(self) -> tuple[str, dict[str, Any]] | None:
        return super().activation() if self.quantize_activations else None


class MixFP4QATLinear(nn.Linear):
    """A float ``nn.Linear`` whose forward fake-quantizes the weight (and the input, for W4A4) with a
    straight-through gradient. Its ``weight`` trains as usual; packing it afterwards with
    ``quantize_(model, MixFP4WeightOnlyConfig(fmt=...))`` gives the same decoded weight the forward
    used."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        config: MixFP4QATConfig | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.config = config or MixFP4QATConfig()

    @classmethod
    def from_linear(
        cls, linear: nn.Linear, config: MixFP4QATConfig | None = None
    ) -> MixFP4QATLinear:
        """A QAT layer sharing ``linear``'s parameters (no copy)."""
        out = cls(
            linear.in_features,
            linear.out_features,
            linear.bias is not None,
            config=config,
            device="meta",
        )
        out.weight = linear.weight
        out.bias = linear.bias
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cfg = self.config
        w = fake_quantize(self.weight, cfg.fmt, **cfg.weight_quant_kwargs())
        act = cfg.activation()
        if act is not None:
            x = fake_quantize(x, act[0], **act[1])
        return nn.functional.linear(x, w, self.bias)

    def extra_repr(self) -> str:
        act = self.config.activation()
        return f"{super().extra_repr()}, fmt={self.config.fmt}, act={act[0] if act else 'none'}, qat=ste"


def _default_filter(module: nn.Module, fqn: str) -> bool:
    return isinstance(module, nn.Linear)


def _swap(linear: nn.Linear, config: MixFP4WeightOnlyConfig) -> nn.Module:
    if isinstance(config, MixFP4QATConfig):
        return MixFP4QATLinear.from_linear(linear, config)
    return MixFP4Linear.from_linear(linear, config)


def quantize_(
    model: nn.Module,
    config: MixFP4WeightOnlyConfig | None = None,
    filter_fn: Callable[[nn.Module, str], bool] | None = None,
) -> nn.Module:
    """Replace, in place, every ``nn.Linear`` that ``filter_fn(module, fqn)`` accepts by a
    :class:`MixFP4Linear` built with ``config`` (a :class:`MixFP4QATLinear` with a
    :class:`MixFP4QATConfig`); return ``model``.

    The default filter takes every ``nn.Linear`` that is not already packed (QAT layers included:
    that is how a QAT model is converted). A layer shared by several parents is quantized once and
    every reference to it is replaced by the same new module, so sharing survives. Layers are
    quantized along their input features (the GEMM's K); an input width that is not a multiple of
    the block size is zero-padded.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    config = config or MixFP4WeightOnlyConfig()
    if not isinstance(config, MixFP4WeightOnlyConfig):
        raise TypeError(f"config must be a MixFP4 config, got {type(config).__name__}")
    if isinstance(model, nn.Linear):
        # In-place replacement needs a parent; torchao swaps a bare root, we cannot return a
        # different object from an in-place call without surprising the caller.
        raise TypeError(
            f"quantize_ replaces layers inside a model; got a bare {type(model).__name__}: wrap it "
            "(nn.Sequential(linear)) or use MixFP4Linear.from_linear(linear, config)"
        )
    keep = filter_fn or _default_filter
    qat = isinstance(config, MixFP4QATConfig)
    skip = (MixFP4Linear, MixFP4QATLinear) if qat else (MixFP4Linear,)
    replacements: dict[int, nn.Module] = {}
    # named_modules() lists a shared module once, under its first name: that name goes to filter_fn.
    for fqn, m in model.named_modules():
        if fqn and isinstance(m, nn.Linear) and not isinstance(m, skip) and keep(m, fqn):
            replacements[id(m)] = _swap(m, config)
    # Then every parent's every reference, not only the first path to each module.
    for parent in list(model.modules()):
        for child_name, child in list(parent.named_children()):
            if id(child) in replacements:
                setattr(parent, child_name, replacements[id(child)])
    return model
