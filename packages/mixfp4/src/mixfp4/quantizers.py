"""NVFP4, MXFP4 and MixFP4 quantization into :class:`~mixfp4.packed.MX4Packed`, and decoding.

NVFP4 (torchao 0.18 ``nvfp4_quantize`` order of operations, ModelOpt zero-block rule by default)::

    s_t = amax(|X|) / (448 · 6)
    s_b = E4M3_RNE(clamp((amax_b / 6) / s_t, lo, 448))          per 16-element block
    q   = E2M1_RNE(clamp(x · ((1 / s_t) / s_b), -6, 6));   x̂ = q · (s_t · s_b)

MixFP4 computes a second candidate per block on the uniform grid (E1M2 read as the integers 0..7, block
scale ``(amax_b / 7) / s_t``), keeps the candidate with the smaller block error (ties keep E2M1, i.e.
NVFP4) and records the choice in bit 7 of the scale byte. With the same tensor scale the E2M1
candidate *is* the NVFP4 block, so every block's error is at most NVFP4's.

MXFP4 (OCP MX v1.0): 32-element blocks, power-of-two scale ``2^(floor(log2 amax_b) - 2)`` (E8M0),
elements ``E2M1_RNE(clamp(x / scale, -6, 6))``, no tensor scale.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

from mixfp4.formats import E1M2, E2M1, E4M3, E8M0, FloatFormat
from mixfp4.packed import (
    E1M2_MODES,
    E1M2_MULTIPLIER,
    FLAG,
    FMTS,
    NAN_POLICIES,
    SCALE_MAGNITUDE,
    Fmt,
    MX4Packed,
    pack_nibbles,
)
from shared_core.kernels import block_absmax, resolve_backend

__all__ = [
    "SELECTORS",
    "dequantize",
    "quantize",
    "quantize_mixfp4",
    "quantize_mxfp4",
    "quantize_nvfp4",
]

SELECTORS: tuple[str, ...] = ("mse", "mae", "absmax")
ROUNDINGS: tuple[str, ...] = ("rne", "stochastic")
SCALE_MINS = {"subnormal": 2.0**-9, "normal": 2.0**-6}
PADS: tuple[str, ...] = ("zero", "error")
E4M3_MAX = 448.0
_ACCEPTED = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


# ---------------------------------------------------------------------------------------------
# input checks
# ---------------------------------------------------------------------------------------------
def _choice(name: str, value: Any, options: Sequence[Any]) -> None:
    if value not in options:
        raise ValueError(f"{name} must be one of {tuple(options)}, got {value!r}")


def _check_input(x: Any, nan_policy: str) -> torch.Tensor:
    """float32 view of ``x`` after the dtype and shape checks (NaN/Inf: :func:`_block_amax`)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in _ACCEPTED:
        raise TypeError(
            f"x must be float16, bfloat16, float32 or float64, got {x.dtype} "
            "(integer, bool, complex and float8 inputs are not quantized)"
        )
    if x.ndim == 0 or x.shape[-1] == 0:
        raise ValueError(f"x needs a non-empty last dimension to block, got shape {tuple(x.shape)}")
    _choice("nan_policy", nan_policy, NAN_POLICIES)
    return x.detach().float()


def _check_block_size(
    block_size: Any, standard: int, strict: bool, fmt: str, stacklevel: int
) -> int:
    if not isinstance(block_size, int) or isinstance(block_size, bool):
        raise TypeError(f"block_size must be an int, got {type(block_size).__name__}")
    if block_size == standard:
        return block_size
    if strict:
        raise ValueError(
            f"{fmt} uses block_size={standard}, got {block_size}; "
            "pass strict=False for a non-standard block size"
        )
    if block_size < 2 or block_size % 2:
        raise ValueError(f"block_size must be an even int >= 2, got {block_size}")
    warnings.warn(
        f"block_size={block_size} is not {fmt}-compatible (hardware uses {standard})",
        UserWarning,
        stacklevel=stacklevel,
    )
    return block_size


def _pad(x: torch.Tensor, block_size: int, pad: str) -> torch.Tensor:
    _choice("pad", pad, PADS)
    k = x.shape[-1]
    rem = k % block_size
    if not rem:
        return x
    if pad == "error":
        raise ValueError(f"last dimension {k} is not a multiple of block_size={block_size}")
    return torch.nn.functional.pad(x, (0, block_size - rem))


def _blocked(x: torch.Tensor, block_size: int) -> torch.Tensor:
    """``x`` ``[..., K]`` viewed as ``[..., K / block_size, block_size]`` (also with zero rows)."""
    return x.reshape(*x.shape[:-1], x.shape[-1] // block_size, block_size)


def _finite_part(x: torch.Tensor, block_size: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``x`` with non-finite values zeroed, and the per-block mask of blocks that held any."""
    finite = torch.isfinite(x)
    if bool(finite.all()):
        return x, None
    bad = _blocked(~finite, block_size).any(dim=-1)
    return torch.where(finite, x, torch.zeros((), dtype=x.dtype)), bad


def _block_amax(
    x: torch.Tensor, block_size: int, nan_policy: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Apply ``nan_policy`` to padded ``x``: ``(x, block absmax, mask of NaN blocks or None)``.

    With ``"raise"`` the finiteness check reads the block maxima, which ``torch.amax`` makes NaN/Inf
    wherever the block holds one: a pass over a 16x smaller tensor instead of over ``x``.
    """
    bad = None
    if nan_policy == "propagate":
        x, bad = _finite_part(x, block_size)
    amax = block_absmax(x, block_size, backend="torch")
    if nan_policy == "raise" and not bool(torch.isfinite(amax).all()):
        n_bad = int((~torch.isfinite(x)).sum())
        raise ValueError(
            f"input contains NaN/Inf ({n_bad} values); they would poison every scale. "
            "Clean the input or pass nan_policy='propagate' (those blocks decode to NaN)"
        )
    return x, amax, bad


def _tensor_scale(
    block_amax: torch.Tensor, tensor_scale: Any, denominator: float
) -> tuple[torch.Tensor, bool]:
    """The FP32 tensor scale (a multiplier) and whether the caller supplied it."""
    device = block_amax.device
    if tensor_scale is not None:
        value = torch.as_tensor(tensor_scale, dtype=torch.float32, device=device).reshape(())
        v = float(value)
        if not math.isfinite(v) or v <= 0:
            raise ValueError(f"tensor_scale must be a finite positive number, got {v!r}")
        return value, True
    amax = block_amax.amax() if block_amax.numel() else torch.zeros((), device=device)
    scale = amax.float() / denominator
    if float(amax) == 0:
        # An all-zero tensor: any scale decodes to zero; 1.0 keeps every number finite.
        scale = torch.ones((), dtype=torch.float32, device=device)
    elif float(scale) == 0:
        # amax so small that amax / 2688 underflows: the smallest normal keeps the division finite.
        scale = torch.full((), torch.finfo(torch.float32).tiny, device=device)
    return scale, False


# ---------------------------------------------------------------------------------------------
# the maths of one candidate
# ---------------------------------------------------------------------------------------------
def e4m3_block_scale(raw: torch.Tensor, scale_min: str) -> tuple[torch.Tensor, torch.Tensor]:
    """E4M3 byte and float32 value of block scales ``raw`` (float32, non-negative).

    ``scale_min="subnormal"`` (ModelOpt): an all-zero block gets scale 1.0, others clamp to
    ``[2^-9, 448]``; ``"normal"`` (torchao): clamp to ``[2^-6, 448]``. Clamping to 448 *before* the cast
    is what keeps NaN bytes (0x7F) out of the scales.
    """
    if scale_min == "subnormal":
        raw = torch.where(raw == 0, torch.ones((), dtype=raw.dtype, device=raw.device), raw)
    clamped = raw.clamp(SCALE_MINS[scale_min], E4M3_MAX)
    byte = E4M3.encode(clamped)
    return byte, E4M3.decode(byte)


def _sign_nibble(x: torch.Tensor) -> torch.Tensor:
    """uint8 ``8`` where ``x`` has its sign bit set (``-0`` included), else ``0``."""
    return torch.signbit(x).view(torch.uint8) << 3  # a bool tensor's bytes are 0/1


def _round_elements(
    a: torch.Tensor, sign: torch.Tensor, fmt: FloatFormat, noise: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sign-magnitude 4-bit codes (uint8) of magnitudes ``a >= 0`` saturating at ``fmt.max``, with
    the sign nibbles ``sign`` (:func:`_sign_nibble`), and the magnitudes' rounded values.

    The sign bit follows the input even where the magnitude rounds to 0 (torchao's ``-0`` code 8).
    """
    if noise is None:
        mag, value = fmt.round_magnitude(a)
    else:
        mag = fmt.stochastic_magnitude(a, noise)
        value = fmt.magnitudes.to(a.device)[mag]
    return mag.to(torch.uint8) | sign, value


def quantize_candidate(
    blocks: torch.Tensor,
    abs_blocks: torch.Tensor,
    sign: torch.Tensor,
    amax: torch.Tensor,
    s_t: torch.Tensor,
    fmt: FloatFormat,
    multiplier: float,
    scale_min: str,
    noise: torch.Tensor | None = None,
    *,
    with_xhat: bool = True,
) -> dict[str, torch.Tensor]:
    """Quantize ``blocks`` ``[..., nb, B]`` on the grid ``multiplier · fmt`` with E4M3 block scales.

    ``abs_blocks`` and ``sign`` (:func:`_sign_nibble`) are ``|blocks|`` and its sign nibbles,
    computed once for both candidates: scaling by a positive factor keeps signs, and
    ``|x| · r == |x · r|`` bit for bit. Returns the scale ``byte`` and ``raw`` scale ``[..., nb]``, ``codes`` ``[..., nb, B]`` and (with
    ``with_xhat``) the dequantized ``xhat``, computed exactly as :func:`dequantize` does, so block
    errors agree bit for bit with errors measured on the decoded tensor.
    """
    grid = fmt.max * multiplier
    raw = (amax / grid) / s_t
    byte, s_b = e4m3_block_scale(raw, scale_min)
    # torchao 0.18's order: multiply by (1 / s_t) / s_b rather than divide by s_t · s_b (they can
    # differ in the last bit, which moves values sitting on a rounding boundary).
    reciprocal = ((1.0 / s_t) / s_b).unsqueeze(-1)
    # No clamp to ±grid here: the rounding saturates at fmt.max = grid / multiplier, and dividing by
    # the power of two ``multiplier`` commutes with that clamp exactly.
    scaled = abs_blocks * reciprocal
    if multiplier != 1.0:
        scaled = scaled / multiplier
    codes, magnitude = _round_elements(scaled, sign, fmt, noise)
    out = {"byte": byte, "raw": raw, "codes": codes}
    if with_xhat:
        # (v · m) · t == v · (m · t) for the power of two m: one rounding of the same product, as
        # dequantize's (v · 4) · (s_t · s_b) on E1M2 blocks.
        total = ((s_t * s_b) * multiplier).unsqueeze(-1)
        out["xhat"] = magnitude.copysign(blocks) * total  # the sign of the code, -0 included
    return out


def block_error(diff: torch.Tensor, selector: str) -> torch.Tensor:
    """Per-block error of ``diff`` ``[..., nb, B]`` in float64: sum of squares, of |·|, or max |·|."""
    d = diff.double()
    if selector == "mse":
        return (d * d).sum(-1)  # not square(): that runs pow(), several times slower
    if selector == "mae":
        return d.abs().sum(-1)
    return d.abs().amax(-1)


def _saturation_warning(count: int, n_blocks: int) -> None:
    if count:
        warnings.warn(
            f"{count} of {n_blocks} blocks saturated the E4M3 block scale (448): tensor_scale is "
            "too small for them (calibrated on smaller data?); their values were clipped",
            UserWarning,
            stacklevel=4,
        )


# ---------------------------------------------------------------------------------------------
# NVFP4 / MixFP4
# ---------------------------------------------------------------------------------------------
def _mixfp4_reference(
    x: torch.Tensor,
    amax: torch.Tensor,
    *,
    block_size: int,
    s_t: torch.Tensor,
    selector: str,
    use: tuple[bool, bool],
    e1m2_mode: str,
    scale_min: str,
    noise: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pure-torch MixFP4 on padded finite float32 ``x`` with block maxima ``amax``: packed codes,
    scale bytes, saturated mask."""
    blocks = _blocked(x, block_size)
    if noise is not None:
        noise = noise.reshape(blocks.shape)
    use_e2m1, use_e1m2 = use
    both = use_e2m1 and use_e1m2  # a single candidate needs no decoding and no error
    mult = E1M2_MULTIPLIER[e1m2_mode]
    abs_blocks, sign = blocks.abs(), _sign_nibble(blocks)
    a = b = None
    if use_e2m1:
        a = quantize_candidate(
            blocks, abs_blocks, sign, amax, s_t, E2M1, 1.0, scale_min, noise, with_xhat=both
        )
    if use_e1m2:
        b = quantize_candidate(
            blocks, abs_blocks, sign, amax, s_t, E1M2, mult, scale_min, noise, with_xhat=both
        )
    if a is None or b is None:
        only = a if b is None else b
        assert only is not None
        pick = torch.full(amax.shape, b is not None, dtype=torch.bool, device=x.device)
        codes, byte, raw = only["codes"], only["byte"], only["raw"]
    else:
        # Strictly better only: a tie keeps E2M1, so exact-NVFP4 blocks stay NVFP4.
        pick = block_error(b["xhat"] - blocks, selector) < block_error(a["xhat"] - blocks, selector)
        codes = torch.where(pick.unsqueeze(-1), b["codes"], a["codes"])
        byte = torch.where(pick, b["byte"], a["byte"])
        raw = torch.where(pick, b["raw"], a["raw"])
    byte = byte | (pick.to(torch.uint8) * FLAG)
    return pack_nibbles(codes.reshape(x.shape)), byte, raw > E4M3_MAX


def quantize_mixfp4(
    x: torch.Tensor,
    *,
    block_size: int = 16,
    tensor_scale: float | torch.Tensor | None = None,
    selector: str = "mse",
    formats: Sequence[str] = ("e2m1", "e1m2"),
    e1m2_mode: str = "int",
    scale_min: str = "subnormal",
    rounding: str = "rne",
    generator: torch.Generator | None = None,
    pad: str = "zero",
    nan_policy: str = "raise",
    strict: bool = True,
    backend: str = "auto",
) -> MX4Packed:
    """Quantize ``x`` along its last dim to MixFP4: per 16-block the better of E2M1 and E1M2.

    Args:
        x: float16/bfloat16/float32/float64 tensor, quantized along the last (reduction) dim.
        block_size: 16 (the NVFP4 hardware block); others need ``strict=False``.
        tensor_scale: FP32 multiplier ``s_t``; default ``amax(|x|) / (448·6)`` (``/(448·1.75)`` in
            ``e1m2_mode="frac"``), or 1.0 for an all-zero tensor. Pass a calibrated value for
            static activation scales; blocks whose scale then exceeds 448 are clipped with a warning.
        selector: block error that picks the candidate: ``"mse"`` (sum of squares), ``"mae"``,
            ``"absmax"`` (largest error). Ties keep E2M1.
        formats: candidate element formats; ``("e2m1",)`` gives NVFP4 bits, ``("e1m2",)`` pure INT4.
        e1m2_mode: ``"int"`` reads E1M2 as the integers 0..7 with block scale ``amax_b / 7``;
            ``"frac"`` uses the E1M2 values 0..1.75 with a tensor scale shrunk by 1.75 / 6.
        scale_min: ``"subnormal"`` (ModelOpt: clamp at 2^-9, zero blocks scale 1.0) or
            ``"normal"`` (torchao: clamp at 2^-6).
        rounding: ``"rne"`` (round to nearest, ties to even) or ``"stochastic"`` (for QAT
            gradients; uses ``generator``).
        pad: ``"zero"`` pads a last dim that is not a multiple of ``block_size``; ``"error"`` raises.
        nan_policy: ``"raise"`` on NaN/Inf; ``"propagate"`` gives their blocks the NaN scale byte 0x7F.
        backend: ``"torch"`` (the reference), ``"triton"`` (fused kernel, stochastic rounding
            included: it reads the same noise tensor) or ``"auto"``.
    """
    return _quantize_e4m3(
        x,
        fmt="mixfp4",
        block_size=block_size,
        tensor_scale=tensor_scale,
        selector=selector,
        formats=formats,
        e1m2_mode=e1m2_mode,
        scale_min=scale_min,
        rounding=rounding,
        generator=generator,
        pad=pad,
        nan_policy=nan_policy,
        strict=strict,
        backend=backend,
    )


def _quantize_e4m3(
    x: torch.Tensor,
    *,
    fmt: Fmt,
    block_size: int,
    tensor_scale: float | torch.Tensor | None,
    selector: str,
    formats: Sequence[str],
    e1m2_mode: str,
    scale_min: str,
    rounding: str,
    generator: torch.Generator | None,
    pad: str,
    nan_policy: str,
    strict: bool,
    backend: str,
) -> MX4Packed:
    """NVFP4 and MixFP4 (E4M3 block scales, FP32 tensor scale) into an ``fmt`` container."""
    x = _check_input(x, nan_policy)
    label = {"mixfp4": "MixFP4", "nvfp4": "NVFP4"}[fmt]
    block_size = _check_block_size(block_size, 16, strict, label, stacklevel=4)
    _choice("selector", selector, SELECTORS)
    _choice("e1m2_mode", e1m2_mode, E1M2_MODES)
    _choice("scale_min", scale_min, tuple(SCALE_MINS))
    _choice("rounding", rounding, ROUNDINGS)
    formats = tuple(formats)
    if not formats or any(f not in ("e2m1", "e1m2") for f in formats):
        raise ValueError(f"formats must be a non-empty subset of ('e2m1', 'e1m2'), got {formats!r}")
    use = ("e2m1" in formats, "e1m2" in formats)
    shape = tuple(x.shape)
    xp, amax, bad_blocks = _block_amax(_pad(x, block_size, pad), block_size, nan_policy)
    frac = e1m2_mode == "frac" and use[1]
    s_t, user_scale = _tensor_scale(amax, tensor_scale, E4M3_MAX * (1.75 if frac else 6.0))
    noise = None
    if rounding == "stochastic":
        noise = torch.rand(xp.shape, generator=generator, device=xp.device)

    if resolve_backend(backend, xp) == "triton":
        from mixfp4.kernels import mixfp4_quantize_triton

        codes, byte, saturated = mixfp4_quantize_triton(
            xp, s_t, block_size, selector, use, E1M2_MULTIPLIER[e1m2_mode], scale_min, noise
        )
    else:
        codes, byte, saturated = _mixfp4_reference(
            xp,
            amax,
            block_size=block_size,
            s_t=s_t,
            selector=selector,
            use=use,
            e1m2_mode=e1m2_mode,
            scale_min=scale_min,
            noise=noise,
        )
    if user_scale:
        _saturation_warning(int(saturated.sum()), saturated.numel())
    if bad_blocks is not None:
        byte = torch.where(bad_blocks, torch.tensor(SCALE_MAGNITUDE, dtype=torch.uint8), byte)
        codes = codes.masked_fill(bad_blocks.repeat_interleave(block_size // 2, dim=-1), 0)
    return MX4Packed(
        codes=codes,
        scales=byte,
        tensor_scale=s_t.reshape(()).clone(),
        shape=shape,
        block_size=block_size,
        fmt=fmt,
        e1m2_mode=e1m2_mode,
    )


def quantize_nvfp4(
    x: torch.Tensor,
    *,
    block_size: int = 16,
    tensor_scale: float | torch.Tensor | None = None,
    scale_min: str = "subnormal",
    rounding: str = "rne",
    generator: torch.Generator | None = None,
    pad: str = "zero",
    nan_policy: str = "raise",
    strict: bool = True,
    backend: str = "auto",
) -> MX4Packed:
    """Quantize ``x`` along its last dim to NVFP4 (E2M1 elements, E4M3 scales per 16, FP32 tensor scale).

    Bit-compatible with torchao's ``_nvfp4_quantize`` with ``scale_min="normal"`` and the same
    ``tensor_scale``; the default ``"subnormal"`` follows ModelOpt. Arguments as
    :func:`quantize_mixfp4`.
    """
    return _quantize_e4m3(
        x,
        fmt="nvfp4",
        block_size=block_size,
        tensor_scale=tensor_scale,
        selector="mse",
        formats=("e2m1",),
        e1m2_mode="int",
        scale_min=scale_min,
        rounding=rounding,
        generator=generator,
        pad=pad,
        nan_policy=nan_policy,
        strict=strict,
        backend=backend,
    )


# ---------------------------------------------------------------------------------------------
# MXFP4
# ---------------------------------------------------------------------------------------------
def mx_shared_exponent(amax: torch.Tensor, scale_rounding: str) -> torch.Tensor:
    """E8M0 exponent per block: ``floor(log2 amax) - 2`` (OCP) or ``ceil(log2(amax / 6))`` (no clip).

    ``frexp`` gives ``floor(log2)`` exactly (``log2`` in float can round up just below a power of two).
    A zero block takes the lowest exponent, as microxcaling does.
    """
    amax = amax.float()
    if scale_rounding == "floor":
        mantissa, exp = torch.frexp(amax)
        shared = exp.long() - 1 - 2
    else:
        mantissa, exp = torch.frexp(amax / E2M1.max)
        shared = exp.long() - (mantissa == 0.5).long()
    shared = torch.where(amax == 0, torch.full_like(shared, -127), shared)
    return shared.clamp(-127, 127)


def quantize_mxfp4(
    x: torch.Tensor,
    *,
    block_size: int = 32,
    scale_rounding: str = "floor",
    rounding: str = "rne",
    generator: torch.Generator | None = None,
    pad: str = "zero",
    nan_policy: str = "raise",
    strict: bool = True,
) -> MX4Packed:
    """Quantize ``x`` along its last dim to MXFP4 (E2M1 elements, E8M0 scale per 32, no tensor scale).

    ``scale_rounding="floor"`` is the OCP MX v1.0 rule (values above ``6 · 2^e`` saturate);
    ``"ceil"`` rounds the scale up so that nothing clips (fouroversix, torchao RCEIL-like).
    """
    x = _check_input(x, nan_policy)
    block_size = _check_block_size(block_size, 32, strict, "MXFP4", stacklevel=3)
    _choice("scale_rounding", scale_rounding, ("floor", "ceil"))
    _choice("rounding", rounding, ROUNDINGS)
    shape = tuple(x.shape)
    xp, amax, bad_blocks = _block_amax(_pad(x, block_size, pad), block_size, nan_policy)
    exp = mx_shared_exponent(amax, scale_rounding)
    scale = torch.pow(2.0, exp.double()).float().unsqueeze(-1)
    blocks = _blocked(xp, block_size)
    scaled = (blocks / scale).clamp(-E2M1.max, E2M1.max)
    noise = None
    if rounding == "stochastic":
        noise = torch.rand(scaled.shape, generator=generator, device=xp.device)
    codes, _ = _round_elements(scaled.abs(), _sign_nibble(scaled), E2M1, noise)
    byte = E8M0.encode_exponent(exp)
    if bad_blocks is not None:
        byte = torch.where(bad_blocks, torch.tensor(E8M0.nan_byte, dtype=torch.uint8), byte)
        codes = codes.masked_fill(bad_blocks.unsqueeze(-1), 0)
    return MX4Packed(
        codes=pack_nibbles(codes.reshape(xp.shape)),
        scales=byte,
        tensor_scale=torch.ones((), dtype=torch.float32, device=xp.device),
        shape=shape,
        block_size=block_size,
        fmt="mxfp4",
    )


# ---------------------------------------------------------------------------------------------
# one entry point, and decoding
# ---------------------------------------------------------------------------------------------
def quantize(x: torch.Tensor, fmt: str = "mixfp4", **kwargs: Any) -> MX4Packed:
    """``quantize_<fmt>(x, **kwargs)`` for ``fmt`` in ``"mixfp4" | "nvfp4" | "mxfp4"``."""
    _choice("fmt", fmt, FMTS)
    quantizers: dict[str, Callable[..., MX4Packed]] = {
        "mixfp4": quantize_mixfp4,
        "nvfp4": quantize_nvfp4,
        "mxfp4": quantize_mxfp4,
    }
    return quantizers[fmt](x, **kwargs)


def dequantize(
    packed: MX4Packed, dtype: torch.dtype = torch.float32, *, nan_policy: str = "raise"
) -> torch.Tensor:
    """Decode ``packed`` to a ``dtype`` tensor of its original shape: ``x̂ = v · (s_t · s_b)``.

    A NaN scale byte (E4M3 0x7F/0xFF, E8M0 0xFF) raises ``ValueError`` unless
    ``nan_policy="propagate"``, which decodes those blocks to NaN.
    """
    if not isinstance(packed, MX4Packed):
        raise TypeError(f"dequantize expects an MX4Packed, got {type(packed).__name__}")
    _choice("nan_policy", nan_policy, NAN_POLICIES)
    if nan_policy == "raise":
        n_nan = int(packed.nan_blocks().sum())
        if n_nan:
            raise ValueError(
                f"NaN scale byte in {n_nan} blocks (0x7F/0xFF); decode with nan_policy='propagate' "
                "to get NaN there"
            )
    v = packed.element_values()
    v = _blocked(v, packed.block_size)
    total = (packed.tensor_scale.reshape(()).float() * packed.block_scales()).unsqueeze(-1)
    xhat = (v * total).reshape(*v.shape[:-2], packed.padded_k)
    return xhat[..., : packed.shape[-1]].to(dtype)
