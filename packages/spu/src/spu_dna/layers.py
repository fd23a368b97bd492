"""The three plasticity layers and the SPU block (our reconstruction of the paper's abstract).

Every layer takes ``x`` of ``(batch, length, d)`` and an optional ``mask`` of ``(batch, length)``
(1 at real positions, 0 at padding). Padded positions are zeroed before every convolution and FFT and
left out of every mean, so appending padding never changes what real positions compute.
"""

from __future__ import annotations

import torch
from torch import nn

from spu_dna.functional import (
    channel_saliency,
    check_filter_taps,
    check_mask,
    fft_conv,
    fft_size,
    fit_filter,
    saliency_gate,
    sample_spectrum,
)
from spu_dna.kernels import token_conv

__all__ = ["DomainPlasticity", "LocusPlasticity", "SPUBlock", "SaliencyPlasticity"]

PADS = ("linear", "circular")
FUSIONS = ("gate", "concat")
SPL_MODES = ("residual", "gate")
EXTRAPOLATIONS = ("error", "interpolate")
FILTER_INIT_STD = 0.5


def _zero_padding(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    return x if mask is None else x * mask.unsqueeze(-1).to(x.dtype)


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    return value


class LocusPlasticity(nn.Module):
    """LPL: a token-specific depthwise convolution (dynamic convolution) and a GLU projection.

    Position ``t`` convolves its neighbourhood with its own kernels ``softmax_j(W_k x_t + b_k)``
    (``groups`` kernels of width ``kernel``); cost ``O(L k d)``, receptive field ``kernel``.
    """

    def __init__(
        self,
        d_model: int,
        kernel: int = 9,
        groups: int = 8,
        softmax: bool = True,
        backend: str = "auto",
    ) -> None:
        super().__init__()
        if kernel < 1 or d_model % groups:
            raise ValueError(
                f"need kernel >= 1 and groups dividing d_model, got kernel={kernel}, "
                f"groups={groups}, d_model={d_model}"
            )
        self.kernel, self.groups, self.softmax, self.backend = kernel, groups, softmax, backend
        self.generator = nn.Linear(d_model, groups * kernel)
        # GLU (spec: "GLU/linear"): the convolution is linear in x, and mean pooling of a linear map
        # sees only base composition; the gate gives each position a nonlinear motif detector.
        self.out_proj = nn.Linear(d_model, 2 * d_model)

    def kernels(self, x: torch.Tensor) -> torch.Tensor:
        """The per-position kernels, ``(B, L, groups, kernel)``."""
        logits = self.generator(x).unflatten(-1, (self.groups, self.kernel))
        return logits.softmax(dim=-1) if self.softmax else logits

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = _zero_padding(x, mask)
        return self.project(token_conv(x, self.kernels(x), backend=self.backend))

    def project(self, y: torch.Tensor) -> torch.Tensor:
        """The GLU output projection applied after the convolution."""
        return nn.functional.glu(self.out_proj(y), dim=-1)


class DomainPlasticity(nn.Module):
    """DPL: a gated short depthwise convolution (time) and an FFT global filter (frequency), fused.

    The global filter is a learnable complex response at ``filter_taps`` evenly spaced frequencies from
    0 to Nyquist, linearly interpolated onto the bins of each FFT grid (:func:`sample_spectrum`), so
    its parameter count does not depend on ``max_len``. ``pad="linear"`` zero-pads to a power of two
    >= 2L (a non-circular convolution): the response is sampled on the grid of ``max_len`` and its
    kernel cut to the lags a shorter sequence meets, so padding never changes real positions.
    ``pad="circular"`` wraps around (shift-equivariant, but then padding would leak, so masked batches
    are refused) and samples the response on the length-``L`` grid. Sequences longer than ``max_len``
    raise unless ``length_extrapolation="interpolate"`` (the response is sampled on their grid).
    ``fusion="gate"``: ``sigma(W_g x) * y_time + (1 - sigma(W_g x)) * y_freq``; ``"concat"``:
    ``W_o [y_time; y_freq]``.
    """

    def __init__(
        self,
        d_model: int,
        time_kernel: int = 5,
        max_len: int = 1024,
        pad: str = "linear",
        fusion: str = "gate",
        use_time: bool = True,
        use_freq: bool = True,
        length_extrapolation: str = "error",
        filter_taps: int = 128,
    ) -> None:
        super().__init__()
        if not (use_time or use_freq):
            raise ValueError("DomainPlasticity needs use_time or use_freq")
        self.pad = _choice("pad", pad, PADS)
        self.fusion = _choice("fusion", fusion, FUSIONS)
        self.length_extrapolation = _choice(
            "length_extrapolation", length_extrapolation, EXTRAPOLATIONS
        )
        self.max_len, self.use_time, self.use_freq = max_len, use_time, use_freq
        if use_time:
            self.time_conv = nn.Conv1d(
                d_model, d_model, time_kernel, padding=time_kernel // 2, groups=d_model
            )
            self.time_gate = nn.Linear(d_model, d_model)
        if use_freq:
            filter_taps = check_filter_taps(filter_taps)
            # A random complex response of unit-order gain (a random global mixing at
            # initialisation), stored as (real, imag) pairs.
            self.filter = nn.Parameter(FILTER_INIT_STD * torch.randn(d_model, filter_taps, 2))
        both = use_time and use_freq
        if both and fusion == "gate":
            self.fusion_gate = nn.Linear(d_model, d_model)
        width = 2 * d_model if both and fusion == "concat" else d_model
        self.out_proj = nn.Linear(width, d_model)

    def spectrum(self, length: int) -> tuple[torch.Tensor, int]:
        """The complex filter for a sequence of ``length`` and its FFT size."""
        if length > self.max_len and self.length_extrapolation == "error":
            raise ValueError(
                f"sequence length {length} exceeds dpl_max_len={self.max_len}; raise dpl_max_len or "
                "set length_extrapolation='interpolate'"
            )
        stored: torch.Tensor = self.filter
        if stored.dtype not in (torch.float32, torch.float64):  # half filters: FFT in float32
            stored = stored.float()
        taps = torch.view_as_complex(stored)
        n = fft_size(length, self.pad)
        if self.pad == "linear" and length <= self.max_len:
            n_ref = fft_size(self.max_len, "linear")
            return fit_filter(sample_spectrum(taps, n_ref), n_ref, length)
        return sample_spectrum(taps, n), n

    def time_branch(self, x: torch.Tensor) -> torch.Tensor:
        short = self.time_conv(x.transpose(1, 2)).transpose(1, 2)
        return short * torch.sigmoid(self.time_gate(x))

    def freq_branch(self, x: torch.Tensor) -> torch.Tensor:
        spectrum, n = self.spectrum(x.shape[1])
        return fft_conv(x, spectrum, n)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.pad == "circular" and mask is not None and not bool(mask.all()):
            raise ValueError(
                "pad='circular' wraps padding into real positions; use pad='linear' for padded batches"
            )
        x = _zero_padding(x, mask)
        if not self.use_freq:
            return self.out_proj(self.time_branch(x))
        if not self.use_time:
            return self.out_proj(self.freq_branch(x))
        y_time, y_freq = self.time_branch(x), self.freq_branch(x)
        if self.fusion == "concat":
            return self.out_proj(torch.cat([y_time, y_freq], dim=-1))
        gate = torch.sigmoid(self.fusion_gate(x))
        return self.out_proj(gate * y_time + (1 - gate) * y_freq)


class SaliencyPlasticity(nn.Module):
    """SPL: token saliency ``alpha_t = sigma(w^T x_t + b)`` times channel saliency (squeeze-excitation)
    ``beta = sigma(W2 relu(W1 mean_t x))``; returns ``(alpha * beta * x, alpha)``, ``alpha`` being the
    saliency map over positions (0 at padding)."""

    def __init__(self, d_model: int, reduction: int = 4) -> None:
        super().__init__()
        self.token = nn.Linear(d_model, 1)
        self.squeeze = nn.Linear(d_model, max(1, d_model // reduction))
        self.excite = nn.Linear(max(1, d_model // reduction), d_model)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        alpha = torch.sigmoid(self.token(x)).squeeze(-1)
        if mask is not None:
            alpha = alpha * mask.to(alpha.dtype)
        beta = channel_saliency(x, mask, self.squeeze, self.excite)
        return saliency_gate(x, alpha, beta), alpha


class SPUBlock(nn.Module):
    """One pre-norm SPU block.

    ``spl_mode="residual"``: ``x += LPL(LN x); x += DPL(LN x); x += SPL(LN x)``.
    ``spl_mode="gate"``: ``x += SPL(DPL(LPL(LN x)))``, SPL gating the block's output.
    ``use_lpl``, ``use_dpl_time``, ``use_dpl_freq``, ``use_spl`` remove a layer or branch (ablations).
    Returns ``(x, alpha)``; ``alpha`` is ``None`` without SPL.
    """

    def __init__(
        self,
        d_model: int,
        *,
        lpl_kernel: int = 9,
        lpl_groups: int = 8,
        lpl_softmax: bool = True,
        dpl_time_kernel: int = 5,
        dpl_max_len: int = 1024,
        dpl_pad: str = "linear",
        dpl_fusion: str = "gate",
        length_extrapolation: str = "error",
        dpl_filter_taps: int = 128,
        spl_mode: str = "residual",
        spl_reduction: int = 4,
        use_lpl: bool = True,
        use_dpl_time: bool = True,
        use_dpl_freq: bool = True,
        use_spl: bool = True,
        dropout: float = 0.0,
        backend: str = "auto",
    ) -> None:
        super().__init__()
        self.spl_mode = _choice("spl_mode", spl_mode, SPL_MODES)
        self.lpl = (
            LocusPlasticity(d_model, lpl_kernel, lpl_groups, lpl_softmax, backend)
            if use_lpl
            else None
        )
        self.dpl = (
            DomainPlasticity(
                d_model,
                dpl_time_kernel,
                dpl_max_len,
                dpl_pad,
                dpl_fusion,
                use_dpl_time,
                use_dpl_freq,
                length_extrapolation,
                dpl_filter_taps,
            )
            if use_dpl_time or use_dpl_freq
            else None
        )
        self.spl = SaliencyPlasticity(d_model, spl_reduction) if use_spl else None
        if self.lpl is None and self.dpl is None and self.spl is None:
            raise ValueError("an SPU block needs at least one of LPL, DPL (time or freq) and SPL")
        n_norms = 1 if spl_mode == "gate" else 3
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(n_norms))
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if mask is not None:
            check_mask(mask)
        alpha = None
        if self.spl_mode == "gate":
            h = self.norms[0](x)
            h = h if self.lpl is None else self.lpl(h, mask)
            h = h if self.dpl is None else self.dpl(h, mask)
            if self.spl is not None:
                h, alpha = self.spl(h, mask)
            return x + self.dropout(h), alpha
        if self.lpl is not None:
            x = x + self.dropout(self.lpl(self.norms[0](x), mask))
        if self.dpl is not None:
            x = x + self.dropout(self.dpl(self.norms[1](x), mask))
        if self.spl is not None:
            y, alpha = self.spl(self.norms[2](x), mask)
            x = x + self.dropout(y)
        return x, alpha
