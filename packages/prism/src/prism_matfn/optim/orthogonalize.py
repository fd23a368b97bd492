"""The orthogonalisers and update scalings PrismMuon chooses between, batched over ``(B, m, n)``.

- :func:`fixed_newton_schulz`: ``torch.optim.Muon``'s (and Keller's) fixed quintic in its op order
  (wide orientation, ``A = X Xᵀ``, ``X ← aX + (bA + cA²)X`` by ``addmm``), for ``ns_coefficients=``.
- :func:`scale_update`: what ``update_scale`` does to the orthogonalised matrix before the shape
  factor of :func:`muon_scale`.
"""

from __future__ import annotations

import math

import torch

from prism_matfn.inputs import safe_frobenius_normalize

UPDATE_SCALES: tuple[str, ...] = ("muon", "frobenius", "spectral")
ADJUST_LR: tuple[str | None, ...] = ("keller", "match_rms", None)
TORCH_ADJUST_LR_FN: dict[str, str] = {"original": "keller", "match_rms_adamw": "match_rms"}
"""``torch.optim.Muon``'s ``adjust_lr_fn`` names and ours."""

_SPECTRAL_SQUARINGS = 5
_SPECTRAL_ITERATIONS = 4


def muon_scale(shape: torch.Size | tuple[int, ...], adjust_lr: str | None) -> float:
    """Factor applied to the orthogonalised update of an ``m×n`` matrix.

    ``"keller"``: ``√max(1, m/n)`` (KellerJordan/Muon, torch's ``"original"``); ``"match_rms"``:
    ``0.2·√max(m, n)`` so the update's RMS matches AdamW's (Moonlight, torch's ``"match_rms_adamw"``),
    letting both share one learning rate; ``None``: 1.
    """
    m, n = shape[-2], shape[-1]
    if adjust_lr == "keller":
        return math.sqrt(max(1.0, m / n))
    if adjust_lr == "match_rms":
        return 0.2 * math.sqrt(max(m, n))
    return 1.0


def fixed_newton_schulz(
    G: torch.Tensor,
    coefficients: tuple[float, float, float],
    steps: int,
    eps: float | None,
    dtype: torch.dtype,
) -> torch.Tensor:
    """``torch.optim.Muon``'s Newton–Schulz with any ``(a, b, c)``, over a batch, returned in float32.

    ``eps=None`` normalises scale-safely (no collapse for ``‖G‖_F`` below any eps); a float ``eps``
    divides by ``max(‖G‖_F, eps)`` exactly as ``torch.optim.Muon`` does (which returns a tiny,
    non-orthogonal update when ``‖G‖_F < eps``).
    """
    a, b, c = coefficients
    X = G.to(dtype)
    tall = G.shape[-2] > G.shape[-1]
    if tall:
        X = X.mT
    if eps is None:
        X, _ = safe_frobenius_normalize(X, "PrismMuon", warn=False)
    else:
        X = X / X.norm(dim=(-2, -1), keepdim=True).clamp(min=eps)
    batched = X.ndim > 2
    X = X.reshape(-1, *X.shape[-2:]) if batched else X
    for _ in range(steps):
        A = X @ X.mT
        if batched:
            B = torch.baddbmm(A, A, A, beta=b, alpha=c)
            X = torch.baddbmm(X, B, X, beta=a)
        else:
            B = torch.addmm(A, A, A, beta=b, alpha=c)
            X = torch.addmm(X, B, X, beta=a)
    X = X.reshape(G.shape[:-2] + X.shape[-2:]) if batched else X
    if tall:
        X = X.mT
    return X.float()


def spectral_norm_estimate(O: torch.Tensor) -> torch.Tensor:
    """``σ_max`` per matrix of ``(..., m, n)``, shape ``(..., 1, 1)``: a lower bound, within 0.2 %
    on the near-flat spectra of orthogonalised updates (plain power iteration was 2–5 % low there).

    The spectrum of an orthogonalised update is nearly flat, so power iteration on the Gram matrix
    ``B`` barely separates its top eigenvalue; squaring ``B`` a few times first (Frobenius-normalised,
    ``B^32`` after 5) spreads the spectrum, power iteration on that finds the top eigenvector, and the
    Rayleigh quotient on ``B`` itself gives ``σ_max²``.
    """
    B = O.mT @ O if O.shape[-2] >= O.shape[-1] else O @ O.mT
    tiny = torch.finfo(O.dtype).tiny
    P = B
    for _ in range(_SPECTRAL_SQUARINGS):
        P = P @ P
        P = P / torch.linalg.matrix_norm(P, keepdim=True).clamp_min(tiny)
    n = B.shape[-1]
    # a start with a component along every eigenvector of a generic B (ones alone can miss one)
    v = 1 + 0.01 * torch.arange(n, dtype=O.dtype, device=O.device).reshape(n, 1) / n
    v = v.expand(*B.shape[:-1], 1)
    for _ in range(_SPECTRAL_ITERATIONS):
        v = P @ v
        v = v / torch.linalg.vector_norm(v, dim=-2, keepdim=True).clamp_min(tiny)
    return (v.mT @ B @ v).clamp_min(0).sqrt()


def scale_update(O: torch.Tensor, update_scale: str) -> torch.Tensor:
    """Rescale orthogonalised updates ``(..., m, n)`` as ``update_scale`` says.

    ``"muon"``: unchanged (the raw iterate, as Keller's Muon uses it; a converged PRISM factor has
    spectral norm ≈ 1). ``"frobenius"``: ``‖O‖_F = √min(m, n)`` (the marin author's choice): where the
    momentum is low-rank, the lifted small singular directions are few and this multiplies the
    step — spectral norm up to ``√(min(m,n)/rank)``. ``"spectral"``: ``‖O‖_2 = 1``.
    """
    tiny = torch.finfo(O.dtype).tiny
    if update_scale == "frobenius":
        norm = torch.linalg.matrix_norm(O, keepdim=True).clamp_min(tiny)
        return O * (math.sqrt(min(O.shape[-2:])) / norm)
    if update_scale == "spectral":
        return O / spectral_norm_estimate(O).clamp_min(tiny)
    return O
