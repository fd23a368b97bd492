"""IF4 and four-over-six: the two published per-block choices beside MixFP4, as reference baselines.

``fouroversix`` (PyPI 1.0.5, mit-han-lab) ships both, but only as an sdist whose build imports torch
and compiles CUDA extensions, so it does not install on a CPU machine. These are OUR reconstructions
from its PyTorch reference backend's description (``compute_nv_scale_factors``, ``select_intfloat``,
``select_fouroversix``), used only to measure quantization error; they return fake-quantized
tensors, not packed ones. They are not bit-tested against fouroversix.

* **IF4** (Adaptive Block-Scaled Data Types, arXiv 2603.28765): NVFP4's tensor scale
  ``amax / (448 · 6)`` and ONE E4M3 block scale ``amax_b / 6``; per block either E2M1 codes or INT4
  codes on the grid stretched by 6/7 (levels ``k · 6/7``, k = 0..7), whichever has the smaller block
  error (ties keep E2M1). MixFP4 instead gives its INT candidate its own block scale ``amax_b / 7``.
* **Four over six** (arXiv 2512.02010): E2M1 codes only, each block scaled so that its maximum maps
  either to 6 or to 4 (block scale ×1.5), whichever has the smaller block error (ties keep 6). The
  tensor scale is ``amax / (256 · 6)`` so that the ×1.5 scale stays inside E4M3 (384 ≤ 448).

Shared with our NVFP4 (so that IF4's E2M1 candidate is bit for bit our NVFP4): the E4M3 scale rule
(clamp to ``[2^-9, 448]``, an all-zero block takes scale 1), torchao's element scaling order
``|x| · ((1 / s_t) / s_b)`` and RNE with saturation.
"""

from __future__ import annotations

import torch

from mixfp4.formats import E2M1
from mixfp4.quantizers import e4m3_block_scale

__all__ = ["BASELINES", "fake_quantize_baseline"]

BASELINES: tuple[str, ...] = ("if4", "fouroversix")
_IF4_INT_LEVEL = 6.0 / 7.0  # IF4's INT step: 7 steps span the E2M1 maximum 6
_FOUROVERSIX_E4M3_MAX = 256.0  # leaves room for the ×1.5 (max 4) candidate scale


def _tensor_scale(x: torch.Tensor, e4m3_max: float) -> torch.Tensor:
    amax = x.abs().amax().float()
    return torch.where(amax > 0, amax / (e4m3_max * E2M1.max), torch.ones((), dtype=torch.float32))


def _candidate(
    a: torch.Tensor, amax_b: torch.Tensor, s_t: torch.Tensor, target: float, level: float
) -> torch.Tensor:
    """Decoded magnitudes of blocks ``a`` ``[n, B]`` whose maximum is scaled to ``target`` and
    rounded to the grid ``level · E2M1`` (``level=1``) or ``level · {0..7}`` (``level=6/7``)."""
    _, s_b = e4m3_block_scale((amax_b / target) / s_t, "subnormal")
    reciprocal = ((1.0 / s_t) / s_b).unsqueeze(-1)
    scaled = a * reciprocal
    if level == 1.0:
        _, value = E2M1.round_magnitude(scaled)
    else:
        value = torch.round((scaled / level).clamp(max=7.0)) * level
    return value * (s_t * s_b).unsqueeze(-1)


def _pick(x: torch.Tensor, first: torch.Tensor, second: torch.Tensor) -> tuple[torch.Tensor, float]:
    """Per block the candidate with the smaller float64 squared error (ties: ``first``)."""
    err_first = (first.double() - x.double()).square().sum(-1)
    err_second = (second.double() - x.double()).square().sum(-1)
    use_second = err_second < err_first
    out = torch.where(use_second.unsqueeze(-1), second, first)
    return out, float(use_second.float().mean()) if use_second.numel() else 0.0


def fake_quantize_baseline(
    x: torch.Tensor, method: str, *, block_size: int = 16
) -> tuple[torch.Tensor, float]:
    """``x`` (last dim a multiple of ``block_size``) quantized and decoded by ``method``
    (``"if4"`` or ``"fouroversix"``), in float32, and the share of blocks that took the alternative
    (INT for IF4, scale-to-4 for four-over-six)."""
    if method not in BASELINES:
        raise ValueError(f"method must be one of {BASELINES}, got {method!r}")
    if x.shape[-1] % block_size:
        raise ValueError(
            f"last dimension {x.shape[-1]} is not a multiple of block_size={block_size}"
        )
    xf = x.detach().float().reshape(-1, block_size)
    a, sign = xf.abs(), torch.signbit(xf)
    amax_b = a.amax(-1)
    if method == "if4":
        s_t = _tensor_scale(xf, 448.0)
        first = _candidate(a, amax_b, s_t, E2M1.max, 1.0)
        second = _candidate(a, amax_b, s_t, E2M1.max, _IF4_INT_LEVEL)
    else:
        s_t = _tensor_scale(xf, _FOUROVERSIX_E4M3_MAX)
        first = _candidate(a, amax_b, s_t, E2M1.max, 1.0)
        second = _candidate(a, amax_b, s_t, 4.0, 1.0)
    first, second = torch.where(sign, -first, first), torch.where(sign, -second, second)
    out, share = _pick(xf, first, second)
    return out.reshape(x.shape), share
