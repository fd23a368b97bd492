"""The maths of the three SPU layers as pure functions on tensors.

Layout everywhere: ``x`` is ``(batch, length, channels)``. Every function here is differentiable and
works on any length; the stateful layers in :mod:`spu_dna.layers` hold the parameters around them.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F

__all__ = [
    "channel_saliency",
    "check_filter_taps",
    "check_kernel_shape",
    "check_mask",
    "fft_conv",
    "fft_size",
    "fit_filter",
    "masked_mean",
    "saliency_gate",
    "sample_spectrum",
    "token_conv_reference",
]


def check_kernel_shape(x: torch.Tensor, kernels: torch.Tensor) -> None:
    """Raise unless ``kernels`` is ``(B, L, G, k)`` for ``x`` of ``(B, L, d)`` with ``G`` dividing ``d``."""
    b, length, d = x.shape
    if kernels.dim() != 4 or kernels.shape[:2] != (b, length) or d % kernels.shape[2]:
        raise ValueError(
            f"kernels {tuple(kernels.shape)} must be (batch, length, groups, k) = ({b}, {length}, G, k) "
            f"with d={d} divisible by G"
        )


def check_filter_taps(taps: object, name: str = "filter_taps") -> int:
    """``taps`` if it is an int >= 2 (the global filter's knots: DC and Nyquist at least), else raise."""
    if isinstance(taps, bool) or not isinstance(taps, int) or taps < 2:
        raise ValueError(f"{name} must be an int >= 2 (DC and Nyquist), got {taps!r}")
    return taps


def token_conv_reference(x: torch.Tensor, kernels: torch.Tensor) -> torch.Tensor:
    """Token-specific depthwise convolution as ``k`` shifted multiply-adds.

    ``x``: ``(B, L, d)``; ``kernels``: ``(B, L, G, k)``, one width-``k`` kernel per position and group,
    channel ``c`` using group ``c // (d // G)``. Returns ``y`` with
    ``y[b, t, c] = sum_j kernels[b, t, g(c), j] * x[b, t + j - k // 2, c]`` (zero padding).

    Never materialises a ``B x L x d x k`` unfold: each tap is one shifted view of ``x`` times one
    ``(B, L, G, 1)`` slice of the kernels, so memory stays ``O(B L d)``.
    """
    check_kernel_shape(x, kernels)
    b, length, d = x.shape
    groups, k = kernels.shape[-2:]
    half = k // 2
    padded = F.pad(x, (0, 0, half, k - 1 - half)).view(b, length + k - 1, groups, d // groups)
    y = padded[:, :length] * kernels[..., 0:1]
    for j in range(1, k):
        y = y + padded[:, j : j + length] * kernels[..., j : j + 1]
    return y.reshape(b, length, d)


def fft_size(length: int, pad: str) -> int:
    """The FFT length for a sequence of ``length``: ``length`` itself for ``pad="circular"``; for
    ``pad="linear"`` the power of two >= ``2 * length`` (no wrap-around, and fast FFT sizes)."""
    if pad == "circular":
        return length
    if pad == "linear":
        return 1 << (2 * length - 1).bit_length()
    raise ValueError(f"pad must be 'linear' or 'circular', got {pad!r}")


_warned_half = False


def _float32_for_fft(x: torch.Tensor) -> torch.Tensor:
    # CPU rfft rejects half precision (and GPU half FFTs need power-of-two sizes): compute in float32.
    global _warned_half
    if x.dtype in (torch.float16, torch.bfloat16):
        if x.device.type == "cpu" and not _warned_half:
            warnings.warn(
                f"{x.dtype} input on CPU: the FFT branch runs in float32 and casts back",
                stacklevel=3,
            )
            _warned_half = True
        return x.float()
    return x


def fft_conv(x: torch.Tensor, spectrum: torch.Tensor, n: int) -> torch.Tensor:
    """Per-channel convolution through the FFT: ``irfft(rfft(x, n) * spectrum, n)[:, :L]``.

    ``spectrum``: complex ``(d, n // 2 + 1)``. With ``n >= 2L`` this is the linear convolution of ``x``
    with the kernel ``irfft(spectrum, n)`` (negative lags at the end of that kernel); with ``n == L``
    it is circular. The output is real: for even ``n`` ``irfft`` ignores the imaginary parts of the
    DC and Nyquist bins of the product (of the DC bin only for odd ``n``), so a ``spectrum`` with
    imaginary parts there acts as if they were zero. :func:`sample_spectrum` zeroes them at its knots,
    so nothing is dropped for the learned filter. Half-precision input runs in float32 and is cast back.
    """
    length = x.shape[1]
    if spectrum.shape[-1] != n // 2 + 1:
        raise ValueError(f"spectrum has {spectrum.shape[-1]} bins, n={n} needs {n // 2 + 1}")
    if n < length:
        raise ValueError(f"FFT length n={n} is shorter than the sequence ({length})")
    xf = _float32_for_fft(x)
    spec = torch.fft.rfft(xf, n=n, dim=1) * spectrum.transpose(0, 1)
    return torch.fft.irfft(spec, n=n, dim=1)[:, :length].to(x.dtype)


def sample_spectrum(taps: torch.Tensor, n: int) -> torch.Tensor:
    """The filter ``taps`` (complex ``(d, K)`` at ``K`` evenly spaced frequencies from 0 to Nyquist)
    linearly interpolated at the ``n // 2 + 1`` rFFT frequencies ``2 pi j / n`` of an ``n``-point grid.

    The learned filter is thus one function of normalised frequency with ``K`` knots, whatever the
    grid: its parameter count does not grow with the sequence length. The imaginary parts of the DC
    and Nyquist knots are zeroed before interpolating: a real kernel's response is real at both, and
    an imaginary part there would otherwise leak into the neighbouring bins that ``irfft`` does read.

    The interpolated response is smooth over ``2 pi / (K - 1)``, so its kernel reaches about
    ``+-(K - 1)`` lags (a sinc^2 window); a sequence needs ``K - 1 >= L`` for the filter to couple
    its two ends.
    """
    if not taps.is_complex() or taps.dim() != 2:
        raise ValueError(
            f"taps must be a complex (d, K) tensor, got {taps.dtype} {tuple(taps.shape)}"
        )
    knots = taps.shape[-1]
    if knots < 2:
        raise ValueError(f"taps needs K >= 2 knots (DC and Nyquist), got {knots}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int (the FFT length), got {n!r}")
    real_ends = torch.ones(knots, device=taps.device, dtype=taps.real.dtype)
    real_ends[0] = real_ends[-1] = 0
    taps = torch.complex(taps.real, taps.imag * real_ends)
    pos = torch.arange(n // 2 + 1, device=taps.device, dtype=taps.real.dtype) * (
        2 * (knots - 1) / n
    )
    low = pos.floor().long().clamp(max=knots - 2)
    weight = pos - low
    return taps[:, low] * (1 - weight) + taps[:, low + 1] * weight


def fit_filter(spectrum: torch.Tensor, n_from: int, length: int) -> tuple[torch.Tensor, int]:
    """The spectrum for a sequence of ``length <= n_from / 2`` from a linear filter on an ``n_from`` grid.

    The stored filter is the kernel ``h = irfft(spectrum, n_from)`` (lags ``-(n_from/2 - 1) ...
    n_from/2``). A sequence of ``length`` only meets lags below ``length``, so ``h`` is cut to those
    lags and moved onto the smallest linear grid ``fft_size(length, "linear")``: the output at a real
    position is the same whatever padding follows it. Returns ``(spectrum, n)``.
    """
    n = fft_size(length, "linear")
    if 2 * length > n_from:
        raise ValueError(
            f"a filter on an n={n_from} grid serves lengths <= {n_from // 2}, got {length}"
        )
    if n == n_from:
        return spectrum, n
    h = torch.fft.irfft(spectrum, n=n_from, dim=-1)
    moved = h.new_zeros(h.shape[0], n)
    moved[:, :length] = h[:, :length]
    moved[:, n - length + 1 :] = h[:, n_from - length + 1 :]
    return torch.fft.rfft(moved, dim=-1), n


def check_mask(mask: torch.Tensor) -> None:
    """Raise unless ``mask`` holds only 0 and 1 (or is boolean) and every row keeps a position: other
    values would silently weight positions, and an empty row has no mean to take."""
    if mask.dtype != torch.bool:
        bad = mask[(mask != 0) & (mask != 1)]
        if bad.numel():
            raise ValueError(
                f"attention_mask must hold only 0 and 1 (1 = real position), got values "
                f"{sorted(set(bad.unique().tolist()))}"
            )
    empty = (mask == 0).all(dim=-1).nonzero().flatten()
    if mask.dim() == 2 and empty.numel():
        raise ValueError(
            f"attention_mask masks every position of row(s) {empty.tolist()}: each sequence needs "
            "at least one real position"
        )


def masked_mean(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Mean over the length axis of ``(B, L, d)``, counting only positions where ``mask`` is 1."""
    if mask is None:
        return x.mean(dim=1)
    weights = mask.to(x.dtype).unsqueeze(-1)
    return (x * weights).sum(dim=1) / weights.sum(dim=1).clamp_min(1.0)


def channel_saliency(
    x: torch.Tensor, mask: torch.Tensor | None, squeeze: torch.nn.Linear, excite: torch.nn.Linear
) -> torch.Tensor:
    """Squeeze-excitation over channels: ``sigmoid(W2 relu(W1 mean_t x))``, shape ``(B, d)``."""
    return torch.sigmoid(excite(torch.relu(squeeze(masked_mean(x, mask)))))


def saliency_gate(x: torch.Tensor, token: torch.Tensor, channel: torch.Tensor) -> torch.Tensor:
    """``y[b, t, c] = token[b, t] * channel[b, c] * x[b, t, c]``; both saliencies lie in ``(0, 1)``,
    so ``|y| <= |x|`` element-wise."""
    return x * token.unsqueeze(-1) * channel.unsqueeze(1)
