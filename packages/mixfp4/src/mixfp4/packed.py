"""The packed container of a block-scaled 4-bit tensor and its decoding.

Layout (the one ModelOpt and fouroversix use, row-major scales for CPU)::

    codes        uint8 [..., K_pad / 2]          element 2j in the low nibble, 2j+1 in the high nibble;
                                                 nibble = sign << 3 | magnitude code
    scales       uint8 [..., K_pad / block_size] NVFP4 / MixFP4: E4M3 bits of the block scale, and for
                                                 MixFP4 bit 7 (the sign bit, free because block scales
                                                 are non-negative) = 1 when the block holds E1M2 codes;
                                                 MXFP4: E8M0 bytes
    tensor_scale float32 scalar                  multiplier (default): x̂ = v · (tensor_scale · block_scale);
                                                 divisor (compressed-tensors, vLLM): x̂ = v · (block_scale / tensor_scale)

With ``block_rows=16`` (2-D 16×16 weight blocks, TensorRT-LLM / TransformerEngine) the scale bytes keep
the row-major ``[..., rows, K_pad / block_size]`` layout, each byte repeated over the 16 rows of its
tile, so decoders and GEMMs read 2-D blocks exactly as 1-D ones.

``v`` is the element value: E2M1 for flag 0; for flag 1 the E1M2 value times 4 in ``e1m2_mode="int"``
(the integers 0..7) or the E1M2 value itself in ``e1m2_mode="frac"``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
from collections.abc import Callable
from typing import Any, Literal

import torch

from mixfp4.formats import E1M2, E2M1, E4M3, E8M0

Fmt = Literal["nvfp4", "mixfp4", "mxfp4"]
FMTS: tuple[str, ...] = ("nvfp4", "mixfp4", "mxfp4")
E1M2_MODES: tuple[str, ...] = ("int", "frac")
NAN_POLICIES: tuple[str, ...] = ("raise", "propagate")
TENSOR_SCALE_CONVENTIONS: tuple[str, ...] = ("multiplier", "divisor")
FLAG = 0x80
SCALE_MAGNITUDE = 0x7F

# Element value multiplier of an E1M2 block: read as integers 0..7 ("int") or as E1M2 values.
E1M2_MULTIPLIER = {"int": 4.0, "frac": 1.0}


@functools.cache
def _byte_pairs(e1m2_mode: str) -> torch.Tensor:
    """``[512, 2]`` float32: the two element values of each packed byte, E2M1 then E1M2 rows."""
    byte = torch.arange(256)
    pairs = [
        torch.stack([fmt.decode(byte & 0x0F), fmt.decode(byte >> 4)], dim=-1)
        for fmt in (E2M1, E1M2)
    ]
    pairs[1] = pairs[1] * E1M2_MULTIPLIER[e1m2_mode]
    return torch.cat(pairs)


def pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """Two 4-bit codes per byte along the last dim (even length): element 2j in the low nibble."""
    codes = codes.to(torch.uint8)
    if sys.byteorder == "little" and codes.is_contiguous():
        # Read each pair as one int16 ``lo | hi << 8``: ``(v | v >> 4)`` has ``lo | hi << 4`` in its
        # low byte. Contiguous passes, several times faster than two strided slices.
        pairs = codes.view(torch.int16)
        return (pairs | (pairs >> 4)).to(torch.uint8)
    return codes[..., 0::2] | (codes[..., 1::2] << 4)


def unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`pack_nibbles`: uint8 codes, twice as long in the last dim."""
    low = packed & 0x0F
    high = packed >> 4
    return torch.stack([low, high], dim=-1).reshape(*packed.shape[:-1], packed.shape[-1] * 2)


def require(ok: torch.Tensor, message: str, detail: Callable[[], str] | None = None) -> None:
    """Raise ``ValueError(message + detail())`` unless every element of ``ok`` is true.

    On CPU the check runs at once (and ``detail`` may count the offending values); on an
    accelerator it is queued with ``torch._assert_async`` so that the forward path makes no host
    sync; on the meta device there are no values to check.
    """
    if ok.device.type == "meta":
        return
    if ok.device.type == "cpu":
        if not bool(ok.all()):
            raise ValueError(message + (detail() if detail is not None else ""))
        return
    torch._assert_async(ok.all(), message)


def _check_tensor_scale(tensor_scale: Any) -> None:
    """A one-element float32 tensor holding a finite positive multiplier.

    On CPU the value is read and named in the error; on an accelerator the check is queued
    (``torch._assert_async``) so that building a container costs no host sync.
    """
    if not isinstance(tensor_scale, torch.Tensor):
        raise TypeError(
            f"tensor_scale must be a one-element float32 tensor, got {type(tensor_scale).__name__}"
        )
    if tensor_scale.dtype != torch.float32 or tensor_scale.numel() != 1:
        raise TypeError(
            "tensor_scale must be a one-element float32 tensor, got "
            f"{tensor_scale.dtype} of shape {tuple(tensor_scale.shape)}"
        )
    require(
        torch.isfinite(tensor_scale) & (tensor_scale > 0),
        "tensor_scale must be a finite positive number",
        lambda: f", got {float(tensor_scale)!r}",
    )


@dataclasses.dataclass(frozen=True, eq=False)
class MX4Packed:
    """A tensor quantized to NVFP4, MixFP4 or MXFP4; see the module docstring for the layout.

    ``shape`` is the original (unpadded) shape; the last dim was zero-padded to a multiple of
    ``block_size`` before quantization and :func:`dequantize` crops it again.
    """

    codes: torch.Tensor
    scales: torch.Tensor
    tensor_scale: torch.Tensor
    shape: tuple[int, ...]
    block_size: int
    fmt: Fmt
    e1m2_mode: str = "int"
    block_rows: int = 1
    tensor_scale_convention: str = "multiplier"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))
        if self.fmt not in FMTS:
            raise ValueError(f"fmt must be one of {FMTS}, got {self.fmt!r}")
        if self.e1m2_mode not in E1M2_MODES:
            raise ValueError(f"e1m2_mode must be one of {E1M2_MODES}, got {self.e1m2_mode!r}")
        for name in ("codes", "scales"):
            t = getattr(self, name)
            if not isinstance(t, torch.Tensor) or t.dtype != torch.uint8:
                got = t.dtype if isinstance(t, torch.Tensor) else type(t).__name__
                raise TypeError(f"{name} must be a uint8 tensor, got {got}")
        _check_tensor_scale(self.tensor_scale)
        devices = {t.device for t in (self.codes, self.scales, self.tensor_scale)}
        if len(devices) != 1:
            raise ValueError(
                "codes, scales and tensor_scale must be on one device, got "
                f"{self.codes.device}, {self.scales.device} and {self.tensor_scale.device}"
            )
        if not isinstance(self.block_size, int) or isinstance(self.block_size, bool):
            raise TypeError(f"block_size must be an int, got {type(self.block_size).__name__}")
        if self.block_size < 2 or self.block_size % 2:
            raise ValueError(f"block_size must be an even int >= 2, got {self.block_size}")
        if not self.shape:
            raise ValueError("shape must have at least one dimension")
        k = self.shape[-1]
        k_pad = math.ceil(k / self.block_size) * self.block_size
        want_codes = (*self.shape[:-1], k_pad // 2)
        want_scales = (*self.shape[:-1], k_pad // self.block_size)
        if tuple(self.codes.shape) != want_codes or tuple(self.scales.shape) != want_scales:
            raise ValueError(
                f"packed shapes do not match shape={self.shape}, block_size={self.block_size}: "
                f"codes {tuple(self.codes.shape)} (expected {want_codes}), "
                f"scales {tuple(self.scales.shape)} (expected {want_scales})"
            )
        self._check_block_rows()
        if self.fmt == "nvfp4":
            require(
                (self.scales & FLAG) == 0,
                "an NVFP4 tensor has scale bytes with bit 7 set (unsigned E4M3 scales)",
            )

    def _check_block_rows(self) -> None:
        """1 (1-D blocks) or ``block_size`` (2-D tiles): then every row of a tile holds its bytes."""
        if self.tensor_scale_convention not in TENSOR_SCALE_CONVENTIONS:
            raise ValueError(
                f"tensor_scale_convention must be one of {TENSOR_SCALE_CONVENTIONS}, "
                f"got {self.tensor_scale_convention!r}"
            )
        if not isinstance(self.block_rows, int) or isinstance(self.block_rows, bool):
            raise TypeError(
                f"block_rows must be an int (1 or block_size={self.block_size}), got "
                f"{type(self.block_rows).__name__} {self.block_rows!r}"
            )
        if self.block_rows == 1:
            return
        if self.block_rows != self.block_size:
            raise ValueError(
                f"block_rows must be 1 or block_size={self.block_size}, got {self.block_rows!r}"
            )
        if len(self.shape) < 2:
            raise ValueError(f"2-D blocks need at least 2 dims, got shape {self.shape}")
        rows = torch.arange(self.shape[-2], device=self.scales.device)
        first = rows - rows % self.block_rows
        require(
            self.scales.index_select(-2, first) == self.scales,
            f"block_rows={self.block_rows}: scale bytes differ within a 2-D tile",
        )

    def __repr__(self) -> str:
        extra = f", e1m2_mode={self.e1m2_mode!r}" if self.fmt == "mixfp4" else ""
        if self.block_rows != 1:
            extra += f", block_rows={self.block_rows}"
        if self.tensor_scale_convention != "multiplier":
            extra += f", tensor_scale_convention={self.tensor_scale_convention!r}"
        return (
            f"MX4Packed(fmt={self.fmt!r}, shape={self.shape}, block_size={self.block_size}{extra}, "
            f"tensor_scale={float(self.tensor_scale):.6g}, device={self.codes.device})"
        )

    # -- views ---------------------------------------------------------------------------------
    @property
    def padded_k(self) -> int:
        return self.codes.shape[-1] * 2

    def format_map(self) -> torch.Tensor:
        """Bool per block: True where the block holds E1M2 codes (always False for NVFP4/MXFP4)."""
        if self.fmt != "mixfp4":
            return torch.zeros(self.scales.shape, dtype=torch.bool, device=self.scales.device)
        return (self.scales & FLAG) != 0

    def nan_blocks(self) -> torch.Tensor:
        """Bool per block: True where the scale byte is NaN (E4M3 ``0x7F``/``0xFF``, E8M0 ``0xFF``)."""
        if self.fmt == "mxfp4":
            return self.scales == E8M0.nan_byte
        return (self.scales & SCALE_MAGNITUDE) == SCALE_MAGNITUDE

    def block_scales(self) -> torch.Tensor:
        """float32 block scales (flag stripped), without the tensor scale; NaN for NaN bytes."""
        if self.fmt == "mxfp4":
            return E8M0.decode(self.scales)
        return E4M3.decode(self.scales & SCALE_MAGNITUDE)

    def tensor_multiplier(self) -> torch.Tensor:
        """float32 scalar the block scales are multiplied by (``1 / tensor_scale`` for a divisor)."""
        s = self.tensor_scale.reshape(()).float()
        return 1.0 / s if self.tensor_scale_convention == "divisor" else s

    def decode_scales(self) -> torch.Tensor:
        """float32 ``[..., nb]`` full scale of every block, rounded as the convention's decoder
        rounds it: ``tensor_scale · block_scale`` or ``block_scale / tensor_scale``."""
        s = self.tensor_scale.reshape(()).float()
        if self.tensor_scale_convention == "divisor":
            return self.block_scales() / s
        return s * self.block_scales()

    def element_values(self) -> torch.Tensor:
        """float32 element values ``v`` of every (padded) position, before any scale."""
        lut = _byte_pairs(self.e1m2_mode).to(self.codes.device)
        idx = self.codes.long()
        if self.fmt == "mixfp4":
            # Rows 256..511 of the table hold the E1M2 pairs: one gather decodes both grids.
            flags = self.format_map().repeat_interleave(self.block_size // 2, dim=-1)
            idx = idx | (flags.long() << 8)
        # index_select on the flat index is several times faster than lut[idx] on CPU.
        pairs = lut.index_select(0, idx.reshape(-1))
        return pairs.reshape(*self.codes.shape[:-1], self.padded_k)

    def stats(self, reference: torch.Tensor | None = None) -> dict[str, float]:
        """``e1m2_fraction`` and, given the original tensor, ``mse`` and ``sqnr_db``."""
        out = {
            "e1m2_fraction": float(self.format_map().float().mean()) if self.scales.numel() else 0.0
        }
        if reference is not None:
            from mixfp4.quantizers import dequantize

            ref = reference.detach().float()
            err = (dequantize(self) - ref).double()
            mse = float(err.pow(2).mean())
            signal = float(ref.double().pow(2).mean())
            out["mse"] = mse
            out["sqnr_db"] = 10 * math.log10(signal / mse) if mse > 0 else math.inf
        return out

    @property
    def bits_per_element(self) -> float:
        """Storage per original element: 4 bits + 8 / block_size (+ the FP32 tensor scale, amortised,
        which MXFP4 does not have)."""
        n = math.prod(self.shape)
        tensor_scale_bits = 0 if self.fmt == "mxfp4" else 32
        total = self.codes.numel() * 8 + self.scales.numel() * 8 + tensor_scale_bits
        return total / n if n else math.nan

    # -- movement and export -------------------------------------------------------------------
    def to(self, device: torch.device | str) -> MX4Packed:
        return dataclasses.replace(
            self,
            codes=self.codes.to(device),
            scales=self.scales.to(device),
            tensor_scale=self.tensor_scale.to(device),
        )

    def tensors(self, prefix: str = "") -> dict[str, torch.Tensor]:
        """The three tensors under ``prefix`` + ``codes`` / ``scales`` / ``tensor_scale``."""
        return {
            f"{prefix}codes": self.codes.contiguous(),
            f"{prefix}scales": self.scales.contiguous(),
            f"{prefix}tensor_scale": self.tensor_scale.reshape(()).float().contiguous(),
        }

    def metadata(self) -> dict[str, Any]:
        """JSON-serialisable attributes that, with :meth:`tensors`, rebuild the container."""
        return {
            "shape": list(self.shape),
            "block_size": self.block_size,
            "fmt": self.fmt,
            "e1m2_mode": self.e1m2_mode,
            "block_rows": self.block_rows,
            # Ecosystems disagree on whether the tensor scale divides or multiplies: say which.
            "tensor_scale_convention": self.tensor_scale_convention,
        }

    @classmethod
    def from_parts(
        cls, tensors: dict[str, torch.Tensor], metadata: dict[str, Any], prefix: str = ""
    ) -> MX4Packed:
        """Inverse of :meth:`tensors` + :meth:`metadata`."""
        return cls(
            codes=tensors[f"{prefix}codes"],
            scales=tensors[f"{prefix}scales"],
            tensor_scale=tensors[f"{prefix}tensor_scale"],
            shape=tuple(metadata["shape"]),
            block_size=int(metadata["block_size"]),
            fmt=metadata["fmt"],
            e1m2_mode=metadata.get("e1m2_mode", "int"),
            block_rows=int(metadata.get("block_rows", 1)),
            # 0.1 and 0.2.0 files wrote "multiplier: x = v * (tensor_scale * block_scale)".
            tensor_scale_convention=metadata.get("tensor_scale_convention", "multiplier").split(
                ":"
            )[0],
        )

    def equal(self, other: MX4Packed) -> bool:
        """Bit-for-bit equality of every tensor and attribute."""
        return (
            self.metadata() == other.metadata()
            and torch.equal(self.codes, other.codes)
            and torch.equal(self.scales, other.scales)
            and torch.equal(
                self.tensor_scale.reshape(()).view(torch.int32),
                other.tensor_scale.reshape(()).view(torch.int32),
            )
        )
