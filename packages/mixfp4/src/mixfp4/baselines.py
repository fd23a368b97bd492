"""IF4 and four-over-six: the two published per-block choices beside MixFP4, as reference baselines.

``fouroversix`` (PyPI 1.0.5, mit-han-lab) ships both. Its sdist compiles CUDA extensions by default;
on a CPU machine it installs beside torch with
``SKIP_CUDA_BUILD=1 pip install --no-build-isolation --no-deps fouroversix==1.0.5``. These are our
implementations (so the reproduction needs no such build), tested equal to its PyTorch reference
backend (``select_intfloat``, ``select_fouroversix``) in ``tests/test_peers_fouroversix.py``; they
return fake-quantized tensors, not packed ones, and serve only to measure quantization error.

* **IF4** (Adaptive Block-Scaled Data Types, arXiv 2603.28765): NVFP4's tensor scale
  ``amax / (448 · 6)`` and ONE E4M3 block scale ``amax_b / 6``; per block either E2M1 codes or INT4
  codes on the grid stretched by 6/7 (levels ``k · 6/7``, k = 0..7), whichever has the smaller block
  error (ties keep E2M1). MixFP4 instead gives its INT candidate its own block scale ``amax_b / 7``.
* **Four over six** (arXiv 2512.02010): E2M1 codes only, each block scaled so that its maximum maps
  either to 6 or to 4 (block scale ×1.5), whichever has the smaller block error (ties keep 6). The
  tensor scale is ``amax / (256 · 6)`` so that the ×1.5 scale stays inside E4M3 (384 ≤ 448).

IF4 shares our NVFP4's arithmetic (so its E2M1 candidate is bit for bit our NVFP4): the E4M3 scale
rule (clamp to ``[2^-9, 448]``, an all-zero block takes scale 1), torchao's element scaling order
``|x| · ((1 / s_t) / s_b)`` and RNE with saturation. Four-over-six follows fouroversix's order of
operations instead (:func:`_fouroversix_candidate`). Block errors are float64 sums, fouroversix's
float32 ones: they differ only on exact ties (both candidates decode alike), which we keep on the
first candidate.
"""

from __future__ import annotations

import torch

from mixfp4.formats import E2M1
from mixfp4.quantizers import check_input, e4m3_block_scale

__all__ = ["BASELINES", "fake_quantize_baseline"]

BASELINES: tuple[str, ...] = ("if4", "fouroversix")
_IF4_INT_LEVEL = 6.0 / 7.0  # IF4's INT step: 7 steps span the E2M1 maximum 6
_FOUROVERSIX_E4M3_MAX = 256.0  # leaves room for the ×1.5 (max 4) candidate scale


def _tensor_scale(x: torch.Tensor, e4m3_max: float) -> torch.Tensor:
    amax = x.abs().amax().float()
    return torch.where(amax > 0, amax / (e4m3_max * E2M1.max), torch.ones((), dtype=torch.float32))


def _candidate(
    a: torch.Tensor, raw_scale: torch.Tensor, s_t: torch.Tensor, level: float
) -> torch.Tensor:
    """Decoded magnitudes of IF4 blocks ``a`` ``[n, B]`` with block scales ``raw_scale`` (before
    E4M3 rounding), rounded to the grid ``level · E2M1`` (``level=1``) or ``level · {0..7}``
    (``level=6/7``)."""
    _, s_b = e4m3_block_scale(raw_scale, "subnormal")
    reciprocal = ((1.0 / s_t) / s_b).unsqueeze(-1)
    scaled = a * reciprocal
    if level == 1.0:
        _, value = E2M1.round_magnitude(scaled)
    else:
        value = torch.round((scaled / level).clamp(max=7.0)) * level
    return value * (s_t * s_b).unsqueeze(-1)


def _fouroversix_candidate(
    a: torch.Tensor, amax_b: torch.Tensor, amax: torch.Tensor, expansion: float
) -> torch.Tensor:
    """Decoded magnitudes of a four-over-six candidate (``expansion`` 1: maximum to 6; 1.5: to 4) in
    fouroversix's own order of operations (``quantize_to_nvfp4``, ``select_fouroversix``): the
    ×1.5 multiplies the scale-to-6 value before E4M3 rounding, elements are scaled by
    ``1 / ((1 / encode) · s_b)`` and decoded as ``q · s_b · amax / (6 · 256)``. Ours for IF4 and NVFP4
    (torchao's order) differs from this by an ulp here and there, which flips an E4M3 scale or an
    element lying on a rounding midpoint (2 blocks of 65,536 on uniform data)."""
    amax = torch.where(amax > 0, amax, torch.ones((), dtype=amax.dtype, device=amax.device))
    full = E2M1.max * _FOUROVERSIX_E4M3_MAX
    encode = full / amax
    _, s_b = e4m3_block_scale(amax_b / E2M1.max * encode * expansion, "subnormal")
    _, value = E2M1.round_magnitude(a * (1.0 / ((1.0 / encode) * s_b)).unsqueeze(-1))
    return value * s_b.unsqueeze(-1) * amax / full


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
    x = check_input(x, "raise")
    if not isinstance(block_size, int) or isinstance(block_size, bool) or block_size < 1:
        raise ValueError(f"block_size must be a positive int, got {block_size!r}")
    bad = int((~torch.isfinite(x)).sum())
    if bad:
        raise ValueError(
            f"x holds {bad} NaN or infinite value(s); a baseline has no encoding for them"
        )
    if x.shape[-1] % block_size:
        raise ValueError(
            f"last dimension {x.shape[-1]} is not a multiple of block_size={block_size}"
        )
    xf = x.detach().float().reshape(-1, block_size)
    a, sign = xf.abs(), torch.signbit(xf)
    amax_b = a.amax(-1)
    if method == "if4":
        s_t = _tensor_scale(xf, 448.0)
        first = _candidate(a, (amax_b / E2M1.max) / s_t, s_t, 1.0)
        second = _candidate(a, (amax_b / E2M1.max) / s_t, s_t, _IF4_INT_LEVEL)
    else:
        amax = xf.abs().amax()
        first = _fouroversix_candidate(a, amax_b, amax, 1.0)
        second = _fouroversix_candidate(a, amax_b, amax, 1.5)
    first, second = torch.where(sign, -first, first), torch.where(sign, -second, second)
    out, share = _pick(xf, first, second)
    return out.reshape(x.shape), share
