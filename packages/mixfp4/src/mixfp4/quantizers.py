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

import dataclasses
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
    TENSOR_SCALE_CONVENTIONS,
    Fmt,
    MX4Packed,
    pack_nibbles,
    require,
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


def check_input(x: Any, nan_policy: str) -> torch.Tensor:
    """``x`` detached, in its own dtype, after the dtype and shape checks (NaN/Inf:
    :func:`_block_amax`). The quantizers cast to float32 chunk by chunk: a whole float32 copy of a
    bf16 weight would double its memory (the ≤ 3× target)."""
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
    return x.detach()


def _check_output_dtype(dtype: Any) -> None:
    """A decode target must be a floating ``torch.dtype``: an integer one would truncate values."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(
            f"dtype must be a torch.dtype such as torch.float16, got {type(dtype).__name__} {dtype!r}"
        )
    if dtype not in _ACCEPTED:
        raise TypeError(
            f"dtype must be float16, bfloat16, float32 or float64, got {dtype} "
            "(decoded values are not integers)"
        )


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
    amax = _chunked_absmax(x, block_size)
    if nan_policy == "raise":
        require(
            torch.isfinite(amax),
            "input contains NaN/Inf; they would poison every scale. Clean the input or pass "
            "nan_policy='propagate' (those blocks decode to NaN)",
            lambda: f" ({int((~torch.isfinite(x)).sum())} values)",
        )
    return x, amax, bad


def _chunked_absmax(x: torch.Tensor, block_size: int) -> torch.Tensor:
    """float32 block maxima of ``x`` (any float dtype), a chunk of blocks at a time: the reference
    casts and takes ``abs`` of its whole input. Exact: rounding to float32 is monotone, so the
    maximum of the rounded values is the rounded maximum."""
    flat = x.reshape(-1, block_size)
    step = chunk_blocks(flat.shape[0], x.element_size())
    parts = [
        block_absmax(flat[i : i + step], block_size, backend="torch").float()
        for i in range(0, max(flat.shape[0], 1), step)
    ]
    return torch.cat(parts).reshape(*x.shape[:-1], x.shape[-1] // block_size)


def _user_tensor_scale(tensor_scale: Any, device: torch.device) -> torch.Tensor:
    """A caller's tensor scale as a float32 scalar tensor, checked (a finite positive number)."""
    if isinstance(tensor_scale, torch.Tensor):
        if tensor_scale.numel() != 1 or not tensor_scale.is_floating_point():
            raise TypeError(
                "tensor_scale must be a positive float or a one-element floating tensor, got a "
                f"{tensor_scale.dtype} tensor of shape {tuple(tensor_scale.shape)}"
            )
        value = tensor_scale.detach().to(device=device, dtype=torch.float32).reshape(())
    elif isinstance(tensor_scale, (int, float)) and not isinstance(tensor_scale, bool):
        value = torch.tensor(float(tensor_scale), dtype=torch.float32, device=device)
    else:
        raise TypeError(
            "tensor_scale must be a positive float or a one-element floating tensor, got "
            f"{type(tensor_scale).__name__} {tensor_scale!r}"
        )
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"tensor_scale must be a finite positive number, got {v!r}")
    return value


def _tensor_scale(
    block_amax: torch.Tensor, tensor_scale: Any, denominator: float, divisor: bool
) -> tuple[torch.Tensor, bool]:
    """The FP32 tensor scale and whether the caller supplied it: the multiplier
    ``amax / denominator`` or (``divisor``) compressed-tensors' ``denominator / amax``.

    The automatic scale is computed on the device without reading it back (no host sync).
    """
    device = block_amax.device
    if tensor_scale is not None:
        return _user_tensor_scale(tensor_scale, device), True
    amax = block_amax.amax() if block_amax.numel() else torch.zeros((), device=device)
    amax = amax.float()
    tiny = torch.finfo(torch.float32).tiny
    # An all-zero tensor: any scale decodes to zero; 1.0 keeps every number finite. An amax so
    # small that the scale under- (overflows): the smallest normal (its reciprocal) keeps it finite.
    if divisor:
        scale = denominator / amax
        return torch.where(
            amax == 0, 1.0, torch.where(torch.isinf(scale), 1.0 / tiny, scale)
        ), False
    scale = amax / denominator
    scale = torch.where(scale == 0, torch.where(amax == 0, 1.0, tiny), scale)
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
    divisor: bool = False,
) -> dict[str, torch.Tensor]:
    """Quantize the blocks with magnitudes ``abs_blocks`` ``[..., nb, B]`` on the grid ``multiplier · fmt`` with E4M3 block scales.

    ``abs_blocks`` and ``sign`` (:func:`_sign_nibble`) are ``|blocks|`` and its sign nibbles,
    computed once for both candidates: scaling by a positive factor keeps signs, and
    ``|x| · r == |x · r|`` bit for bit. Returns the scale ``byte`` and ``raw`` scale ``[..., nb]``,
    ``codes`` ``[..., nb, B]`` and (with ``with_xhat``) ``diff = |x̂| - |x|``, with ``x̂`` decoded
    exactly as :func:`dequantize` does, so block errors agree bit for bit with errors measured on
    the decoded tensor.
    """
    grid = fmt.max * multiplier
    if divisor:
        # compressed-tensors' order: s_b = E4M3(g · (amax_b / grid)), x / (s_b / g), x̂ = q · (s_b / g).
        raw = s_t * (amax / grid)
        byte, s_b = e4m3_block_scale(raw, scale_min)
        total = (s_b / s_t) * multiplier
        scaled = abs_blocks / total.unsqueeze(-1)
    else:
        raw = (amax / grid) / s_t
        byte, s_b = e4m3_block_scale(raw, scale_min)
        # torchao 0.18's order: multiply by (1 / s_t) / s_b rather than divide by s_t · s_b (they
        # can differ in the last bit, which moves values sitting on a rounding boundary).
        reciprocal = (1.0 / s_t) / s_b
        # No clamp to ±grid here: the rounding saturates at fmt.max = grid / multiplier. Dividing
        # by the power of two ``multiplier`` commutes with that clamp and with the product's
        # rounding (barring subnormal products, which round to code 0 either way), so it folds
        # into the [..., nb] factor.
        if multiplier != 1.0:
            reciprocal = reciprocal / multiplier
        scaled = abs_blocks * reciprocal.unsqueeze(-1)
        total = (s_t * s_b) * multiplier
    codes, magnitude = _round_elements(scaled, sign, fmt, noise)
    out = {"byte": byte, "raw": raw, "codes": codes}
    if with_xhat:
        # (v · m) · t == v · (m · t) for the power of two m: one rounding of the same product, as
        # dequantize's (v · 4) · decode_scales() on E1M2 blocks. Errors on magnitudes: the code's
        # sign is the input's and RNE is symmetric, so |x̂ - x| == | |x̂| - |x| | bit for bit.
        out["diff"] = magnitude * total.unsqueeze(-1) - abs_blocks
    return out


def block_error(diff: torch.Tensor, selector: str) -> torch.Tensor:
    """Per-block error of ``diff`` ``[..., nb, B]`` in float64: sum of squares, of |·|, or max |·|."""
    d = diff.double()
    if selector == "mse":
        return (d * d).sum(-1)  # not square(): that runs pow(), several times slower
    if selector == "mae":
        return d.abs().sum(-1)
    return d.abs().amax(-1)


# Relative gap under which two float32 block errors are re-compared in float64: a float32 sum of 16
# squares is within 17 · 2^-24 (1e-6) of the exact one, far inside 2^-16.
_NEAR_TIE = 2.0**-16
_TINY_ERROR = 2.0**-100  # below this float32 squares may have lost bits to underflow


def pick_e1m2(diff_a: torch.Tensor, diff_b: torch.Tensor, selector: str) -> torch.Tensor:
    """Per block, True where candidate B's error is strictly smaller than A's, decided as in float64.

    The errors are computed in float32 (an eighth of the float64 pass's memory traffic) and only
    blocks whose two errors are within float32's rounding of each other, non-finite or tiny are
    re-compared in float64, so the choice is bit-identical to :func:`block_error`'s.
    """
    if selector == "absmax":  # a max of float32 |d| is exact: no rounding to guard
        return diff_b.abs().amax(-1) < diff_a.abs().amax(-1)
    if selector == "mse":
        err_a, err_b = (diff_a * diff_a).sum(-1), (diff_b * diff_b).sum(-1)
    else:
        err_a, err_b = diff_a.abs().sum(-1), diff_b.abs().sum(-1)
    pick = err_b < err_a
    top = torch.maximum(err_a, err_b)
    # The float32 sum's error bound grows with the block length (256 for a 16x16 tile).
    gap = _NEAR_TIE * max(1.0, diff_a.shape[-1] / 16)
    near = ((err_a - err_b).abs() <= gap * top) | (top < _TINY_ERROR) | ~torch.isfinite(top)
    if bool(near.any()):
        pick[near] = block_error(diff_b[near], selector) < block_error(diff_a[near], selector)
    return pick


def _saturation_warning(count: int, n_blocks: int) -> None:
    if count:
        warnings.warn(
            f"{count} of {n_blocks} blocks saturated the E4M3 block scale (448): tensor_scale is "
            "too small for them (calibrated on smaller data?); their values were clipped",
            UserWarning,
            stacklevel=4,
        )


def _underflow_warning(codes: torch.Tensor, amax: torch.Tensor, block_size: int) -> None:
    """Warn when a calibrated tensor scale flushed every non-zero block to zero codes."""
    nonzero = amax > 0
    n_nonzero = int(nonzero.sum())
    if not n_nonzero:
        return
    # A byte's two magnitudes are bits 0-2 and 4-6; a block decodes to zero iff all of them are 0.
    live = _blocked(codes & 0x77, block_size // 2).amax(dim=-1) > 0
    if not bool((live & nonzero).any()):
        warnings.warn(
            f"all {n_nonzero} non-zero blocks underflowed to zero: tensor_scale is too large "
            "for this tensor (calibrated on larger data?); it decodes to all zeros",
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
    divisor: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pure-torch MixFP4 on padded finite float32 ``x`` with block maxima ``amax``: packed codes,
    scale bytes, saturated mask. ``divisor``: ``s_t`` is compressed-tensors' global scale."""
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
            abs_blocks,
            sign,
            amax,
            s_t,
            E2M1,
            1.0,
            scale_min,
            noise,
            with_xhat=both,
            divisor=divisor,
        )
    if use_e1m2:
        b = quantize_candidate(
            abs_blocks,
            sign,
            amax,
            s_t,
            E1M2,
            mult,
            scale_min,
            noise,
            with_xhat=both,
            divisor=divisor,
        )
    if a is None or b is None:
        only = a if b is None else b
        assert only is not None
        pick = torch.full(amax.shape, b is not None, dtype=torch.bool, device=x.device)
        codes, byte, raw = only["codes"], only["byte"], only["raw"]
    else:
        # Strictly better only: a tie keeps E2M1, so exact-NVFP4 blocks stay NVFP4.
        pick = pick_e1m2(a["diff"], b["diff"], selector)
        codes = torch.where(pick.unsqueeze(-1), b["codes"], a["codes"])
        byte = torch.where(pick, b["byte"], a["byte"])
        raw = torch.where(pick, b["raw"], a["raw"])
    byte = byte | (pick.to(torch.uint8) * FLAG)
    return pack_nibbles(codes.reshape(x.shape)), byte, raw > E4M3_MAX


# Blocks per pass of the reference: its float32 temporaries are about ten times the chunk, so a
# chunk of at most a 32nd of the input's bytes (an eighth of a float32 tensor, a 16th of a bf16 one)
# and at most 2^16 blocks (4 MiB of float32) keeps the peak extra memory near 2x the input; the
# floor keeps per-pass overhead negligible on small tensors.
_CHUNK_MAX_BLOCKS = 1 << 16
_CHUNK_MIN_BLOCKS = 1 << 12


def chunk_blocks(n_blocks: int, itemsize: int = 4) -> int:
    """Blocks per pass for a tensor of ``n_blocks`` blocks of ``itemsize``-byte elements."""
    return max(_CHUNK_MIN_BLOCKS, min(_CHUNK_MAX_BLOCKS, n_blocks * itemsize // 32))


def _mixfp4_chunked(
    x: torch.Tensor, amax: torch.Tensor, *, block_size: int, noise: torch.Tensor | None, **kw: Any
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`_mixfp4_reference` over chunks of blocks (blocks are independent given ``s_t``)."""
    flat = x.reshape(-1, block_size)
    flat_amax = amax.reshape(-1, 1)
    flat_noise = None if noise is None else noise.reshape(-1, block_size)
    # Chunks hold the same number of elements whatever the block length (16, or 256 for tiles).
    per_16 = max(1, block_size // 16)
    step = max(1, chunk_blocks(flat.shape[0] * per_16, x.element_size()) // per_16)
    parts = [
        _mixfp4_reference(
            flat[i : i + step].float(),
            flat_amax[i : i + step],
            block_size=block_size,
            noise=None if flat_noise is None else flat_noise[i : i + step],
            **kw,
        )
        for i in range(0, max(flat.shape[0], 1), step)
    ]
    codes, byte, saturated = (torch.cat(t) for t in zip(*parts, strict=True))
    return (
        codes.reshape(*x.shape[:-1], x.shape[-1] // 2),
        byte.reshape(amax.shape),
        saturated.reshape(amax.shape),
    )


def _to_tiles(t: torch.Tensor, rows: int) -> torch.Tensor:
    """``t`` ``[R, nb · B]`` (B = ``rows``) as ``[ceil(R / B), nb, B · B]``: each 2-D tile's elements
    contiguous, row by row; missing rows of the last tile are zeros (they change neither a tile's
    maximum nor either candidate's error)."""
    if t.shape[0] % rows:
        t = torch.nn.functional.pad(t, (0, 0, 0, -t.shape[0] % rows))
    r, k = t.shape
    tiles = t.reshape(r // rows, rows, k // rows, rows).transpose(1, 2)
    return tiles.reshape(r // rows, k // rows, rows * rows)


def _from_tiles(
    codes: torch.Tensor, byte: torch.Tensor, rows: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inverse of :func:`_to_tiles` for packed ``codes`` ``[T, nb, B · B / 2]`` and the tiles' scale
    bytes ``[T, nb]``: row-major codes ``[T · B, nb · B / 2]`` and each byte repeated over its
    tile's rows ``[T · B, nb]`` (rows past the input's are the caller's to drop)."""
    t, nb = byte.shape
    per_row = codes.reshape(t, nb, rows, rows // 2).transpose(1, 2)
    return per_row.reshape(t * rows, nb * rows // 2), byte.repeat_interleave(rows, dim=0)


def _tile_max(amax: torch.Tensor, rows: int) -> torch.Tensor:
    """Per-tile maxima ``[T, nb]`` of the 1-D block maxima ``amax`` ``[R, nb]`` (missing rows: 0)."""
    padded = torch.nn.functional.pad(amax, (0, 0, 0, -amax.shape[0] % rows))
    return padded.reshape(-1, rows, amax.shape[-1]).amax(-2)


def _quantize_tiles(
    xp: torch.Tensor, amax: torch.Tensor, noise: torch.Tensor | None, block_size: int, **kw: Any
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """2-D ``block_size × block_size`` tiles (``xp`` padded along K): one scale byte and one format
    choice per tile, from the tile's maximum and the error summed over its ``block_size²`` values;
    returned in the row-major layout of 1-D blocks (bytes repeated over the tile's rows).

    Bands of whole tiles, about one 1-D chunk each, are tiled and quantized one at a time: a tiled
    copy of the whole input would add its size to the peak memory (the ≤ 3× target)."""
    if xp.ndim < 2:
        raise ValueError(
            f"block_2d needs at least 2 dims [..., rows, K], got shape {tuple(xp.shape)}"
        )
    rows, r, k = block_size, xp.shape[-2], xp.shape[-1]
    nb = k // rows
    lead = math.prod(xp.shape[:-2])  # not -1: it is ambiguous when there are no rows (r = 0)
    x3, a3 = xp.reshape(lead, r, k), amax.reshape(lead, r, nb)
    n3 = None if noise is None else noise.reshape(lead, r, k)
    codes = torch.empty(x3.shape[0], r, k // 2, dtype=torch.uint8, device=xp.device)
    byte = torch.empty(x3.shape[0], r, nb, dtype=torch.uint8, device=xp.device)
    saturated = []
    step = chunk_blocks(x3.numel() // block_size, xp.element_size())
    band = rows * max(1, step // max(1, nb * rows))
    for i in range(x3.shape[0]):
        for r0 in range(0, r, band):
            part = slice(r0, min(r, r0 + band))
            tiles = _to_tiles(x3[i, part], rows)
            c, b, sat = _mixfp4_reference(
                tiles.reshape(-1, rows * rows).float(),
                _tile_max(a3[i, part], rows).reshape(-1, 1),
                block_size=rows * rows,
                noise=None if n3 is None else _to_tiles(n3[i, part], rows).reshape(tiles.shape),
                **kw,
            )
            c, b = _from_tiles(c.reshape(*tiles.shape[:-1], -1), b.reshape(tiles.shape[:-1]), rows)
            codes[i, part], byte[i, part] = c[: part.stop - r0], b[: part.stop - r0]
            saturated.append(sat.reshape(-1))
    return (
        codes.reshape(*xp.shape[:-1], k // 2),
        byte.reshape(amax.shape),
        torch.cat(saturated) if saturated else torch.zeros(0, dtype=torch.bool),
    )


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
    block_2d: bool = False,
    tensor_scale_convention: str = "multiplier",
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
        block_2d: one scale (and one format choice) per 16×16 tile of the last two dims, the
            weight layout of TensorRT-LLM / TransformerEngine; the container keeps the 1-D layout
            with each byte repeated over its tile's 16 rows (``block_rows=16``).
        tensor_scale_convention: ``"multiplier"`` (torchao, ModelOpt: ``x̂ = v · (s_t · s_b)``,
            ``s_t = amax / (448·6)``) or ``"divisor"`` (compressed-tensors, vLLM's
            ``weight_global_scale``: ``g = 448·6 / amax``, ``s_b = E4M3(g · amax_b / 6)``,
            ``x / (s_b / g)``, ``x̂ = v · (s_b / g)``); a given ``tensor_scale`` is read in it.
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
        block_2d=block_2d,
        tensor_scale_convention=tensor_scale_convention,
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
    block_2d: bool,
    tensor_scale_convention: str,
) -> MX4Packed:
    """NVFP4 and MixFP4 (E4M3 block scales, FP32 tensor scale) into an ``fmt`` container."""
    x = check_input(x, nan_policy)
    label = {"mixfp4": "MixFP4", "nvfp4": "NVFP4"}[fmt]
    block_size = _check_block_size(block_size, 16, strict, label, stacklevel=4)
    _choice("selector", selector, SELECTORS)
    _choice("e1m2_mode", e1m2_mode, E1M2_MODES)
    _choice("scale_min", scale_min, tuple(SCALE_MINS))
    _choice("rounding", rounding, ROUNDINGS)
    # A bare string is one format, not a sequence of characters.
    if isinstance(formats, str):
        formats = (formats,)
    elif not isinstance(formats, (list, tuple)):
        raise TypeError(
            f"formats must be a sequence of 'e2m1'/'e1m2', got {type(formats).__name__} {formats!r}"
        )
    formats = tuple(formats)
    if not formats or any(f not in ("e2m1", "e1m2") for f in formats):
        raise ValueError(f"formats must be a non-empty subset of ('e2m1', 'e1m2'), got {formats!r}")
    use = ("e2m1" in formats, "e1m2" in formats)
    shape = tuple(x.shape)
    _choice("tensor_scale_convention", tensor_scale_convention, TENSOR_SCALE_CONVENTIONS)
    if not isinstance(block_2d, bool):
        raise TypeError(f"block_2d must be a bool, got {type(block_2d).__name__} {block_2d!r}")
    divisor = tensor_scale_convention == "divisor"
    xp, amax, bad_blocks = _block_amax(_pad(x, block_size, pad), block_size, nan_policy)
    frac = e1m2_mode == "frac" and use[1]
    s_t, user_scale = _tensor_scale(amax, tensor_scale, E4M3_MAX * (1.75 if frac else 6.0), divisor)
    noise = None
    if rounding == "stochastic":
        noise = torch.rand(xp.shape, generator=generator, device=xp.device)
    kw: dict[str, Any] = {
        "s_t": s_t,
        "selector": selector,
        "use": use,
        "e1m2_mode": e1m2_mode,
        "scale_min": scale_min,
        "divisor": divisor,
    }
    if _use_triton(backend, xp, block_2d, divisor):
        from mixfp4.kernels import mixfp4_quantize_triton

        codes, byte, saturated = mixfp4_quantize_triton(
            xp.float(), s_t, block_size, selector, use, E1M2_MULTIPLIER[e1m2_mode], scale_min, noise
        )
    elif block_2d:
        codes, byte, saturated = _quantize_tiles(xp, amax, noise, block_size, **kw)
    else:
        codes, byte, saturated = _mixfp4_chunked(xp, amax, block_size=block_size, noise=noise, **kw)
    if user_scale:
        _saturation_warning(int(saturated.sum()), saturated.numel())
        _underflow_warning(codes, amax, block_size)
    if bad_blocks is not None:
        if block_2d:  # a non-finite value poisons its whole tile
            bad_blocks = _tile_any(bad_blocks, block_size)
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
        block_rows=block_size if block_2d else 1,
        tensor_scale_convention=tensor_scale_convention,
    )


def _tile_any(mask: torch.Tensor, rows: int) -> torch.Tensor:
    """Per-block ``mask`` ``[..., R, nb]`` OR-ed over each tile of ``rows`` rows, repeated back."""
    r = mask.shape[-2]
    padded = torch.nn.functional.pad(mask, (0, 0, 0, -r % rows))
    tiles = padded.reshape(*padded.shape[:-2], -1, rows, padded.shape[-1]).any(-2)
    return tiles.repeat_interleave(rows, dim=-2)[..., :r, :]


def _use_triton(backend: str, xp: torch.Tensor, block_2d: bool, divisor: bool) -> bool:
    """The fused kernel covers 1-D blocks with a multiplier tensor scale; an explicit ``"triton"``
    request it cannot serve raises instead of falling back."""
    if backend == "triton" and (block_2d or divisor):
        raise ValueError(
            "backend='triton' supports 1-D blocks with tensor_scale_convention='multiplier'; "
            "use backend='torch' (or 'auto') for block_2d=True or the divisor convention"
        )
    return not (block_2d or divisor) and resolve_backend(backend, xp) == "triton"


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
    block_2d: bool = False,
    tensor_scale_convention: str = "multiplier",
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
        block_2d=block_2d,
        tensor_scale_convention=tensor_scale_convention,
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
    x = check_input(x, nan_policy).float()
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
    _check_output_dtype(dtype)
    _choice("nan_policy", nan_policy, NAN_POLICIES)
    if nan_policy == "raise":
        nan = packed.nan_blocks()
        require(
            ~nan,
            "NaN scale byte (0x7F/0xFF); decode with nan_policy='propagate' to get NaN there",
            lambda: f" ({int(nan.sum())} blocks)",
        )
    k = packed.shape[-1]
    codes = packed.codes.reshape(-1, packed.codes.shape[-1])
    scales = packed.scales.reshape(-1, packed.scales.shape[-1])
    out = torch.empty(codes.shape[0], k, dtype=dtype, device=codes.device)
    # Rows a chunk at a time: the int64 lookup indices and float32 products of the whole tensor
    # would be about 3x the output on top of it.
    step = max(1, chunk_blocks(scales.numel(), out.element_size()) // max(1, scales.shape[-1]))
    for i in range(0, codes.shape[0], step):
        # block_rows=1: a row chunk may cut a 2-D tile, and decoding reads per-row bytes anyway.
        rows = dataclasses.replace(
            packed,
            codes=codes[i : i + step],
            scales=scales[i : i + step],
            shape=(codes[i : i + step].shape[0], k),
            block_rows=1,
        )
        out[i : i + step] = _decode(rows)[:, :k]
    return out.reshape(packed.shape)


def _decode(packed: MX4Packed) -> torch.Tensor:
    """float32 ``v · (s_t · s_b)`` of a 2-D ``packed``, padded columns included."""
    v = _blocked(packed.element_values(), packed.block_size)
    total = packed.decode_scales().unsqueeze(-1)
    return (v * total).reshape(v.shape[0], packed.padded_k)
