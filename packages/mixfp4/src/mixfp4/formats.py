"""Minifloat element and scale formats, their value tables and code encode/decode.

Every table is generated from the bit formula (bias ``b``, ``M`` mantissa bits)::

    e == 0:  v = (-1)^s · 2^(1-b) · m / 2^M          (subnormal)
    e  > 0:  v = (-1)^s · 2^(e-b) · (1 + m / 2^M)

A code is ``s << (E+M) | e << M | m``; for every format here the magnitude code orders like the value.
Rounding to nearest is arithmetic inside the binade of the input (see
:meth:`FloatFormat.round_magnitude`), and a tie goes to the *even* code (round-to-nearest-even, the rule
of IEEE, ml_dtypes and torch casts).
"""

from __future__ import annotations

import dataclasses
import functools

import torch

__all__ = ["E1M2", "E2M1", "E2M2", "E4M3", "E8M0", "FORMATS", "FloatFormat", "get_format"]


@dataclasses.dataclass(frozen=True)
class FloatFormat:
    """A sign-magnitude minifloat with ``exp_bits`` exponent and ``man_bits`` mantissa bits.

    ``nan_codes`` are magnitude codes that mean NaN (E4M3 "fn": ``0x7F``; no infinities anywhere).
    """

    name: str
    exp_bits: int
    man_bits: int
    bias: int
    nan_codes: tuple[int, ...] = ()

    @property
    def bits(self) -> int:
        return 1 + self.exp_bits + self.man_bits

    @property
    def sign_bit(self) -> int:
        return 1 << (self.exp_bits + self.man_bits)

    @functools.cached_property
    def magnitudes(self) -> torch.Tensor:
        """float32 values of every magnitude code ``0 .. 2^(E+M) - 1`` (NaN codes give NaN)."""
        codes = torch.arange(self.sign_bit, dtype=torch.int64)
        e = codes >> self.man_bits
        m = (codes & ((1 << self.man_bits) - 1)).double()
        frac = m / (1 << self.man_bits)
        value = torch.where(
            e == 0,
            2.0 ** (1 - self.bias) * frac,
            torch.pow(2.0, (e - self.bias).double()) * (1 + frac),
        )
        for nan in self.nan_codes:
            value[nan] = float("nan")
        return value.float()

    @functools.cached_property
    def table(self) -> torch.Tensor:
        """float32 values of all ``2^bits`` codes (sign bit set gives the negative)."""
        return torch.cat([self.magnitudes, -self.magnitudes])

    @functools.cached_property
    def max(self) -> float:
        """Largest finite value."""
        finite = self.magnitudes[~self.magnitudes.isnan()]
        return float(finite.max())

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """float32 values of integer ``codes`` (any integer dtype, values ``< 2^bits``)."""
        return self.table.to(codes.device)[codes.long()]

    def round_magnitude(self, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Nearest magnitude code (uint8) and its value (float32) for ``a >= 0``, ties to even,
        saturating at :attr:`max`.

        ``a`` must be finite and non-negative (callers clamp and take ``abs``). Inside the binade of
        ``a`` (exponent ``max(floor(log2 a), 1 - bias)``) the grid is uniform with quantum
        ``2^(exp - M)``, so ``q = round_half_even(a / quantum)`` (an exact division) is the rounded
        count and the code is ``((exp + bias - 1) << M) + q``; that also covers the subnormals and a
        round-up into the next binade. The parity of the code is the parity of ``q``, so ties go to
        the even code. No ``(n, table)`` comparison tensor is built.
        """
        if self.exp_bits == 1:
            # One binade plus the subnormals share the quantum 2^(1 - bias - M): a uniform grid whose
            # code is the count itself (E1M2: k / 4 has code k). Three passes instead of eight.
            step = 2.0 ** (1 - self.bias - self.man_bits)
            q = torch.round(a.float() * (1 / step)).clamp_(max=self.max / step)
            return q.to(torch.uint8), q * step
        a = a.float().clamp(max=self.max)
        # The float32 exponent field of a (>= 0) is floor(log2 a) + 127; clamping it at the lowest
        # binade also covers zero and the subnormals. Bit ops, not frexp (several times slower).
        field = (a.view(torch.int32) >> 23).clamp_(min=128 - self.bias)
        # 2^(exp - M) from its float32 bit pattern: exact, and never subnormal for these formats.
        quantum = ((field - self.man_bits) << 23).view(torch.float32)
        q = torch.round(a / quantum)
        # Codes fit a byte for every format here (E4M3 tops out at 126): the rest runs on uint8.
        code = ((field - (128 - self.bias)).to(torch.uint8) << self.man_bits) + q.to(torch.uint8)
        return code, q * quantum

    def encode_magnitude(self, a: torch.Tensor) -> torch.Tensor:
        """Nearest magnitude code of ``a >= 0`` (see :meth:`round_magnitude`), int64."""
        return self.round_magnitude(a)[0].long()

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Nearest code of finite ``x`` with round-to-nearest-even, saturating to ``±max``, uint8.

        The sign bit is the input's (so a small negative value gives ``-0``), as ml_dtypes casts and
        torchao's NVFP4 packer do.
        """
        mag = self.encode_magnitude(x.float().abs().clamp(max=self.max))
        return (mag | (torch.signbit(x).long() * self.sign_bit)).to(torch.uint8)

    def stochastic_magnitude(self, a: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """Magnitude code of ``a >= 0`` rounded stochastically with uniform ``noise`` in [0, 1).

        Rounds up with probability equal to the distance from the lower grid point over the gap,
        so the expected decoded value is ``a`` inside the grid (unbiased); saturates at :attr:`max`.
        """
        finite = self.magnitudes[~self.magnitudes.isnan()].to(a.device)
        a = a.float().clamp(max=self.max)
        lo = (torch.bucketize(a, finite, right=True) - 1).clamp(0, finite.numel() - 2)
        v_lo, v_hi = finite[lo], finite[lo + 1]
        up = noise < (a - v_lo) / (v_hi - v_lo)
        return lo + up.long()


# NVFP4 / MXFP4 element: magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6.
E2M1 = FloatFormat("e2m1", exp_bits=2, man_bits=1, bias=1)
# MixFP4's uniform grid: magnitudes 0, .25, …, 1.75 (sign-magnitude INT4 divided by 4).
E1M2 = FloatFormat("e1m2", exp_bits=1, man_bits=2, bias=1)
# The 5-bit datapath format both 4-bit grids embed into exactly.
E2M2 = FloatFormat("e2m2", exp_bits=2, man_bits=2, bias=1)
# NVFP4 block scale ("fn": no infinities, S.1111.111 is NaN, max 448).
E4M3 = FloatFormat("e4m3", exp_bits=4, man_bits=3, bias=7, nan_codes=(0x7F,))

FORMATS: dict[str, FloatFormat] = {f.name: f for f in (E2M1, E1M2, E2M2, E4M3)}


class _E8M0:
    """MX block scale: an unsigned power of two ``2^(byte - 127)``; ``0xFF`` is NaN."""

    name = "e8m0"
    bias = 127
    nan_byte = 0xFF

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        exp = codes.long() - self.bias
        value = torch.pow(2.0, exp.double()).float()
        return torch.where(codes.long() == self.nan_byte, float("nan"), value)

    def encode_exponent(self, exp: torch.Tensor) -> torch.Tensor:
        """Byte of the scale ``2^exp`` for integer ``exp`` in ``[-127, 127]``."""
        return (exp.long() + self.bias).to(torch.uint8)


E8M0 = _E8M0()


def get_format(name: str) -> FloatFormat:
    """The element or scale format called ``name`` (``"e2m1"``, ``"e1m2"``, ``"e2m2"``, ``"e4m3"``)."""
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown format {name!r}; expected one of {sorted(FORMATS)}") from None
