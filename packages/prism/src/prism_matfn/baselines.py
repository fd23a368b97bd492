"""Baselines under PRISM's signature, for A/B comparisons: fixed-coefficient Newton–Schulz (cubic,
quintic, Muon's), Polar Express, and the exact SVD/eigh references.

Every iterative baseline runs ``X ← a X + X (b A + c A²)`` with ``A = XᵀX`` on the tall orientation
(Muon's form), from the same scale-safe normalisation as :func:`prism_matfn.polar`, and returns the same
:class:`~prism_matfn.matfn.PrismInfo` (with empty ``alphas``).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from prism_matfn.inputs import gram_t, identity_like, prepare, safe_frobenius_normalize
from prism_matfn.matfn import PrismInfo

Coefficients = tuple[float, float, float]
NAMED_COEFFICIENTS: dict[str, Coefficients] = {
    "classic": (1.5, -0.5, 0.0),  # cubic Newton–Schulz, X(3I − XᵀX)/2
    "quintic": (15 / 8, -10 / 8, 3 / 8),  # the quintic Newton–Schulz PRISM5 reduces to at α = 3/8
    "muon": (3.4445, -4.7750, 2.0315),  # KellerJordan/Muon: fast, but σ only reach ~[0.7, 1.2]
}


def newton_schulz(
    G: torch.Tensor,
    steps: int = 5,
    coeffs: str | Coefficients | Sequence[Coefficients] = "quintic",
    *,
    tol: float | None = None,
    compute_dtype: torch.dtype | None = None,
    check_finite: bool = True,
    return_info: bool = False,
    input_scale: float = 1.0,
) -> torch.Tensor | tuple[torch.Tensor, PrismInfo]:
    """Polar factor by odd-polynomial Newton–Schulz with fixed coefficients ``(a, b, c)``.

    ``coeffs`` is a name from :data:`NAMED_COEFFICIENTS`, one ``(a, b, c)``, or a per-step list (the last
    one repeats). ``input_scale`` divides the normalised input further (Polar Express uses 1.01).
    """
    schedule = _schedule(coeffs)
    if not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be a non-negative int, got {steps!r}")
    X, out_dtype = prepare(G, "newton_schulz", compute_dtype, check_finite)
    if X.numel() == 0:  # nothing to iterate on
        empty = torch.zeros(0, *X.shape[:-2], dtype=torch.float64)
        out = X.to(out_dtype)
        return (out, PrismInfo(empty, empty, 0, max(min(X.shape[-2:]), 1))) if return_info else out
    transposed = X.shape[-2] < X.shape[-1]
    if transposed:
        X = X.mT
    X, _ = safe_frobenius_normalize(X, "newton_schulz", warn=check_finite)
    X = X / input_scale
    n = X.shape[-1]
    track = return_info or tol is not None
    norms: list[torch.Tensor] = []
    plan = itertools.chain(schedule, itertools.repeat(schedule[-1]))
    taken = 0
    for a, b, c in itertools.islice(plan, steps):
        A = gram_t(X)
        if track:
            norms.append(torch.linalg.matrix_norm(identity_like(X, n) - A).double())
            if tol is not None and bool((norms[-1] <= tol * math.sqrt(n)).all()):
                break
        B = b * A + c * (A @ A)
        X = a * X + X @ B
        taken += 1
    else:
        if track:
            norms.append(torch.linalg.matrix_norm(identity_like(X, n) - gram_t(X)).double())
    if transposed:
        X = X.mT
    X = X.to(out_dtype)
    if not return_info:
        return X
    batch = X.shape[:-2]
    history = torch.stack(norms).cpu() if norms else torch.zeros(0, *batch, dtype=torch.float64)
    return X, PrismInfo(torch.zeros(0, *batch, dtype=torch.float64), history, taken, n)


def _schedule(coeffs: str | Coefficients | Sequence[Coefficients]) -> list[Coefficients]:
    if isinstance(coeffs, str):
        if coeffs not in NAMED_COEFFICIENTS:
            raise ValueError(f"coeffs must be one of {sorted(NAMED_COEFFICIENTS)}, got {coeffs!r}")
        return [NAMED_COEFFICIENTS[coeffs]]
    single = len(coeffs) == 3 and all(isinstance(c, (int, float)) for c in coeffs)
    steps: list[Any] = [coeffs] if single else list(coeffs)
    if not steps or any(len(step) != 3 for step in steps):
        raise ValueError(f"coeffs must be (a, b, c) triples, got {coeffs!r}")
    return [(float(a), float(b), float(c)) for a, b, c in steps]


def _optimal_quintic(lo: float, hi: float) -> Coefficients:
    """Odd quintic ``p(x) = ax + bx³ + cx⁵`` minimising ``max_{[lo,hi]} |1 − p(x)|`` (Remez exchange)."""
    if lo / hi >= 1 - 5e-6:
        # The equioscillating quintic tends to the Newton–Schulz quintic scaled to the interval.
        return 15 / 8 / hi, -10 / 8 / hi**3, 3 / 8 / hi**5
    q, r = (3 * lo + hi) / 4, (lo + 3 * hi) / 4  # interior extrema; exact as lo → hi
    error, previous = math.inf, None
    a = b = c = 0.0
    while previous is None or abs(previous - error) > 1e-15:
        previous = error
        points = np.array([lo, q, r, hi])
        system = np.stack([points, points**3, points**5, [1.0, -1.0, 1.0, -1.0]], axis=1)
        a, b, c, error = np.linalg.solve(system, np.ones(4))
        q, r = np.sqrt(
            (-3 * b + np.array([-1.0, 1.0]) * math.sqrt(9 * b**2 - 20 * a * c)) / (10 * c)
        )
    return float(a), float(b), float(c)


@functools.cache
def polar_express_coefficients(
    lower: float = 1e-3, steps: int = 10, safety: float = 1.01, cushion: float = 0.02
) -> tuple[Coefficients, ...]:
    """Per-step Polar Express quintics (Amsel et al. 2025, their published recipe and defaults).

    Greedy composition of minimax quintics on ``[ℓ, u]`` starting from ``ℓ = lower, u = 1``; the interval
    is cushioned below by ``cushion·u`` and every polynomial but the last is scaled by the safety factor
    so round-off cannot push singular values past the fixed point.
    """
    lo, hi = lower, 1.0
    out = []
    for step in range(steps):
        a, b, c = _optimal_quintic(max(lo, cushion * hi), hi)
        if cushion * hi > lo:
            # Re-centre the cushioned polynomial so that 1 − p(ℓ) = p(u) − 1 on the true interval.
            p_lo, p_hi = (a * lo + b * lo**3 + c * lo**5), (a * hi + b * hi**3 + c * hi**5)
            rescale = 2 / (p_lo + p_hi)
            a, b, c = a * rescale, b * rescale, c * rescale
        if step < steps - 1:
            a, b, c = a / safety, b / safety**3, c / safety**5
        out.append((a, b, c))
        lo = a * lo + b * lo**3 + c * lo**5
        hi = 2 - lo
    return tuple(out)


def polar_express(
    G: torch.Tensor,
    steps: int = 5,
    *,
    tol: float | None = None,
    compute_dtype: torch.dtype | None = None,
    check_finite: bool = True,
    return_info: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, PrismInfo]:
    """Polar Express: the ten published per-step quintics (then the last repeats), input scaled by 1.01."""
    return newton_schulz(
        G,
        steps,
        list(polar_express_coefficients()),
        tol=tol,
        compute_dtype=compute_dtype,
        check_finite=check_finite,
        return_info=return_info,
        input_scale=1.01,
    )


def svd_polar(G: torch.Tensor) -> torch.Tensor:
    """Exact polar factor ``U Vᵀ`` from ``torch.linalg.svd`` (the reference)."""
    X, out_dtype = prepare(G, "svd_polar", None, True)
    U, _, Vh = torch.linalg.svd(X, full_matrices=False)
    return (U @ Vh).to(out_dtype)


def eigh_inv_root(A: torch.Tensor, p: float, *, epsilon: float = 0.0) -> torch.Tensor:
    """``(A + εI)^{-1/p}`` of a symmetric matrix by ``torch.linalg.eigh`` (eigenvalues clamped at ε).

    ``p = -2`` gives the square root; Shampoo's exact baseline uses ``p = 2`` or ``4``.
    """
    X, out_dtype = prepare(A, "eigh_inv_root", None, True)
    w, V = torch.linalg.eigh((X + X.mT) * 0.5)
    w = (w + epsilon).clamp_min(max(epsilon, torch.finfo(w.dtype).tiny))
    return ((V * w.pow(-1.0 / p).unsqueeze(-2)) @ V.mT).to(out_dtype)
