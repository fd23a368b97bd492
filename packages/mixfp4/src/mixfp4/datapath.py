"""The single-datapath GEMM: both 4-bit element grids decoded to E2M2 and multiplied there.

E2M1 code ``e1 e0 m`` becomes E2M2 ``e1 e0 m 0`` (a zero mantissa bit appended) and E1M2 code
``e m1 m0`` becomes ``0 e m1 m0`` (a zero exponent bit prepended): both exact. An ``int``-mode E1M2
block is the E1M2 value times 4, a power of two folded into the block scale. A product of two E2M2
values has at most 6 significant bits and a sum of 16 of them is exact in float32, so
:func:`mixfp4_mm` equals dequantize-then-matmul up to the rounding of the scale products.
"""

from __future__ import annotations

import dataclasses

import torch

from mixfp4.formats import E2M2
from mixfp4.packed import E1M2_MULTIPLIER, MX4Packed, unpack_nibbles


def e2m1_to_e2m2(codes: torch.Tensor) -> torch.Tensor:
    """E2M2 code of E2M1 ``codes`` (sign bit 3 moves to bit 4; magnitude gains a zero LSB)."""
    codes = codes.to(torch.uint8)
    return ((codes & 0x8) << 1) | ((codes & 0x7) << 1)


def e1m2_to_e2m2(codes: torch.Tensor) -> torch.Tensor:
    """E2M2 code of E1M2 ``codes`` (sign bit 3 moves to bit 4; a zero exponent MSB is prepended)."""
    codes = codes.to(torch.uint8)
    return ((codes & 0x8) << 1) | (codes & 0x7)


def to_e2m2(packed: MX4Packed) -> tuple[torch.Tensor, torch.Tensor]:
    """E2M2 element codes ``[..., K_pad]`` and the per-block float32 multiplier ``[..., nb]``.

    The multiplier is the block scale, times 4 on ``int``-mode E1M2 blocks (the decoder's +2 on the
    E2M2 exponent); the tensor scale is left out, as a GEMM applies it once at the end.
    """
    codes = unpack_nibbles(packed.codes)
    flags = packed.format_map()
    per_elem = flags.repeat_interleave(packed.block_size, dim=-1)
    e2m2 = torch.where(per_elem, e1m2_to_e2m2(codes), e2m1_to_e2m2(codes))
    mult = packed.block_scales()
    mult = torch.where(flags, mult * E1M2_MULTIPLIER[packed.e1m2_mode], mult)
    return e2m2, mult


def _decoded_rows(p: MX4Packed, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor]:
    """E2M2 values ``[rows, nb, B]`` and block multipliers ``[rows, nb]`` of rows ``start:stop``."""
    rows = dataclasses.replace(
        p,
        codes=p.codes[start:stop],
        scales=p.scales[start:stop],
        shape=(stop - start, p.shape[1]),
        block_rows=1,  # a row chunk may cut a 2-D tile
    )
    codes, mult = to_e2m2(rows)
    # index_select with int32 indices: a quarter of the int64 index a table lookup would build.
    table = E2M2.table.to(codes.device)
    values = table.index_select(0, codes.reshape(-1).int()).reshape(codes.shape)
    return values.reshape(stop - start, -1, p.block_size), mult


def mixfp4_mm(
    a: MX4Packed, b: MX4Packed, *, out_dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """``a @ b.T`` for packed ``a`` ``[M, K]`` and ``b`` ``[N, K]``, both blocked along K.

    Every product is an E2M2 × E2M2 product (exact in float32), summed exactly per block, then
    scaled by the two block multipliers, accumulated over blocks in float32 and multiplied by the
    two tensor scales once. The padded tail of K is zero in both operands.
    """
    for name, p in (("a", a), ("b", b)):
        if not isinstance(p, MX4Packed):
            raise TypeError(f"{name} must be an MX4Packed, got {type(p).__name__}")
        if len(p.shape) != 2:
            raise ValueError(f"{name} must be 2-D [rows, K], got shape {p.shape}")
    if a.shape[1] != b.shape[1] or a.block_size != b.block_size:
        raise ValueError(
            f"inner dimensions differ: a {a.shape} (block {a.block_size}) vs "
            f"b {b.shape} (block {b.block_size})"
        )
    for p in (a, b):
        if bool(p.nan_blocks().any()):
            raise ValueError("NaN scale byte in a GEMM operand")
    bs = a.block_size
    vb, mult_b = _decoded_rows(b, 0, b.shape[0])
    m, n, nb = a.shape[0], b.shape[0], vb.shape[1]
    out = torch.empty(m, n, dtype=torch.float32, device=vb.device)
    # Row chunks of a, decoded one at a time: each builds two [rows, N, nb] tensors (the exact block
    # dot products of E2M2 values and their block multipliers), together at most a quarter of the
    # float32 operands' bytes.
    step = max(1, (m + n) * nb * bs // (8 * n * nb))
    for i in range(0, m, step):
        va, mult_a = _decoded_rows(a, i, min(m, i + step))
        partial = torch.einsum("mkb,nkb->mnk", va, vb)
        partial *= mult_a.unsqueeze(1) * mult_b.unsqueeze(0)
        torch.sum(partial, -1, out=out[i : i + step])
    out *= a.tensor_multiplier() * b.tensor_multiplier()
    return out.to(out_dtype)
