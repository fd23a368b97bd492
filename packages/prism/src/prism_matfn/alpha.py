"""Fitting PRISM's free coefficient α: the pure maths, no iteration state.

Every PRISM update is ``X ← X g(R)`` with residual ``R`` and ``g(r) = g₀(r) + α r^q``; the next residual is
the scalar map ``h(r; α) = 1 − (1 − r) g(r)²`` applied to ``R``. Writing ``h(r; α) = H₀(r) + α H₁(r) +
α² H₂(r)``, the sketched objective ``‖h(R; α) S‖_F²`` is the quartic

    Q(α) = Σ_{a,b} α^{a+b} H_aᵀ M H_b,    M_ij = ⟨R^i S, R^j S⟩_F   (the Krylov Gram matrix),

so one fit costs ``deg h`` products ``R · (n×p)`` and a few inner products. For symmetric ``R``,
``M_ij = t_{i+j}`` with ``t_j = tr(Sᵀ R^j S)`` and the quartic's coefficients reduce to the paper's
``c1..c4`` (tested against them). ``M`` is general, so the same code fits α for a non-symmetric ``R``
(``sign`` of a non-normal matrix).
"""

from __future__ import annotations

import functools
from typing import Literal

import numpy as np
import torch

Degree = Literal[3, 5]
DEGREES: tuple[int, ...] = (3, 5)
ALPHA_BOUNDS: dict[int, tuple[float, float]] = {3: (0.5, 1.0), 5: (0.375, 1.45)}
"""Default ``[α_lo, α_hi]``: the classic Newton–Schulz value and the author's upper bound."""
CLASSIC_ALPHA: dict[int, float] = {3: 0.5, 5: 0.375}
"""α that turns PRISM into classic Newton–Schulz: cubic ``X(3I − XᵀX)/2`` and quintic ``(15, −10, 3)/8``."""
ALPHA_SOLVERS: tuple[str, ...] = ("exact", "grid")


def check_degree(degree: int) -> int:
    if degree not in DEGREES:
        raise ValueError(f"degree must be 3 or 5, got {degree!r}")
    return int(degree)


@functools.cache
def residual_polynomials(degree: int) -> np.ndarray:
    """``H`` of shape ``(3, deg h + 1)``: ``h(r; α) = Σ_a α^a Σ_j H[a, j] r^j`` (ascending powers)."""
    P = np.polynomial.polynomial
    check_degree(degree)
    # g(r) = g0(r) + α top(r): degree 3 is 1 + αr, degree 5 is 1 + r/2 + αr².
    g0, top = ([1.0], [0.0, 1.0]) if degree == 3 else ([1.0, 0.5], [0.0, 0.0, 1.0])
    one_minus_r = [1.0, -1.0]
    h0 = P.polysub([1.0], P.polymul(one_minus_r, P.polymul(g0, g0)))
    h1 = -2.0 * P.polymul(one_minus_r, P.polymul(g0, top))
    h2 = -1.0 * P.polymul(one_minus_r, P.polymul(top, top))
    width = max(len(h0), len(h1), len(h2))
    H = np.zeros((3, width))
    for a, h in enumerate((h0, h1, h2)):
        H[a, : len(h)] = h
    return H


def evaluate_residual_map(
    r: torch.Tensor, alpha: float | torch.Tensor, degree: int
) -> torch.Tensor:
    """``h(r; α)`` elementwise: the scalar residual map of one PRISM step (for oracles and replays)."""
    H = torch.as_tensor(residual_polynomials(degree), dtype=r.dtype, device=r.device)
    powers = r.unsqueeze(-1) ** torch.arange(H.shape[1], device=r.device, dtype=r.dtype)
    h = powers @ H.T  # (..., 3): H0(r), H1(r), H2(r)
    alpha = torch.as_tensor(alpha, dtype=r.dtype, device=r.device)
    return h[..., 0] + alpha * h[..., 1] + alpha**2 * h[..., 2]


def krylov_gram(R: torch.Tensor, S: torch.Tensor, order: int) -> torch.Tensor:
    """``M_ij = ⟨R^i S, R^j S⟩_F`` for ``0 ≤ i, j ≤ order``, batched over ``R``'s leading dims, in float64.

    ``S`` is ``(n, p)`` (shared by the batch) or ``(..., n, p)``. The products run in ``R``'s dtype (at
    least float32); only the ``(order+1)²`` inner products are accumulated in float64.
    """
    work = R if R.dtype in (torch.float32, torch.float64) else R.float()
    V = S.to(work.dtype).expand(*work.shape[:-2], *S.shape[-2:])
    vectors = [V]
    for _ in range(order):
        vectors.append(work @ vectors[-1])
    K = torch.stack(vectors, dim=-3).flatten(-2).double()  # (..., order+1, n·p)
    return K @ K.mT


def power_hankel(eigenvalues: torch.Tensor, order: int) -> torch.Tensor:
    """``M_ij = Σ_l r_l^{i+j}``: the exact (unsketched) Krylov Gram of a symmetric ``R`` from its eigenvalues."""
    r = eigenvalues.double()
    V = r.unsqueeze(-1) ** torch.arange(
        order + 1, device=r.device, dtype=r.dtype
    )  # (..., n, order+1)
    return V.mT @ V


def objective_coefficients(M: torch.Tensor, degree: int) -> torch.Tensor:
    """Coefficients ``(q0, …, q4)`` of ``Q(α) = Σ_k q_k α^k = ‖h(R; α) S‖_F²`` from the Krylov Gram ``M``."""
    H = torch.as_tensor(residual_polynomials(degree), dtype=M.dtype, device=M.device)
    if M.shape[-1] != H.shape[1]:
        raise ValueError(
            f"degree {degree} needs a {H.shape[1]}×{H.shape[1]} Krylov Gram, got {M.shape}"
        )
    pair = H @ M @ H.T  # (..., 3, 3): pair[a, b] = H_aᵀ M H_b
    q = [
        pair[..., 0, 0],
        2 * pair[..., 0, 1],
        2 * pair[..., 0, 2] + pair[..., 1, 1],
        2 * pair[..., 1, 2],
        pair[..., 2, 2],
    ]
    return torch.stack(q, dim=-1)


def evaluate_quartic(q: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """``Q(α)`` for coefficients ``q`` of shape ``(..., 5)`` and candidate α of shape ``(..., c)``."""
    powers = alpha.unsqueeze(-1) ** torch.arange(5, device=q.device, dtype=q.dtype)
    return (powers * q.unsqueeze(-2)).sum(-1)


def minimize_quartic(
    q: torch.Tensor,
    bounds: tuple[float, float],
    solver: str = "exact",
    grid_points: int = 65,
) -> torch.Tensor:
    """``argmin_{α ∈ [lo, hi]} Q(α)`` for each row of ``q`` (shape ``(..., 5)``), on ``q``'s device.

    ``"exact"``: candidates are both endpoints and the real parts of the roots of ``Q'`` (eigenvalues of
    its 3×3 companion matrix) clamped into the interval and polished by two Newton steps; the candidate
    with the lowest ``Q`` wins, so a degenerate or ill-conditioned cubic can only fall back to an
    endpoint, never leave the interval. ``"grid"``: the author's uniform grid of ``grid_points``.
    Ties (a flat objective, e.g. a converged iterate) go to ``lo``, the classic coefficient.
    """
    lo, hi = bounds
    q = q.double()
    if solver == "grid":
        if grid_points < 2:
            raise ValueError(f"alpha_grid_points must be >= 2, got {grid_points}")
        grid = torch.linspace(lo, hi, grid_points, dtype=q.dtype, device=q.device)
        candidates = grid.expand(*q.shape[:-1], grid_points)
    elif solver == "exact":
        d = torch.stack(
            [q[..., 1], 2 * q[..., 2], 3 * q[..., 3], 4 * q[..., 4]], dim=-1
        )  # Q' ascending
        scale = d.abs().amax(-1, keepdim=True)
        d = d / torch.where(scale > 0, scale, torch.ones_like(scale))
        # A vanishing leading coefficient (Q' of lower degree) gets a tiny stand-in: its extra root is
        # huge and lands on an endpoint, the others are polished below.
        lead = d[..., 3]
        lead = torch.where(lead.abs() < 1e-10, torch.full_like(lead, 1e-10), lead)
        companion = torch.zeros(*q.shape[:-1], 3, 3, dtype=q.dtype, device=q.device)
        companion[..., 0, :] = -d[..., [2, 1, 0]] / lead.unsqueeze(-1)
        companion[..., 1, 0] = 1.0
        companion[..., 2, 1] = 1.0
        # A diverging iterate has non-finite traces; LAPACK rejects such input, the endpoints decide.
        companion = torch.nan_to_num(companion, nan=0.0, posinf=0.0, neginf=0.0)
        roots = torch.nan_to_num(torch.linalg.eigvals(companion).real, nan=lo).clamp(lo, hi)
        for _ in range(2):
            slope = _derivative(q, roots, 1)
            curvature = _derivative(q, roots, 2)
            step = torch.where(curvature > 0, slope / curvature, torch.zeros_like(slope))
            roots = (roots - step).clamp(lo, hi)
        ends = torch.tensor([lo, hi], dtype=q.dtype, device=q.device).expand(*q.shape[:-1], 2)
        candidates = torch.cat([ends, roots], dim=-1)
    else:
        raise ValueError(f"alpha_solver must be one of {ALPHA_SOLVERS}, got {solver!r}")
    values = evaluate_quartic(q, candidates)
    best = values.argmin(-1, keepdim=True)
    return candidates.gather(-1, best).squeeze(-1)


def _derivative(q: torch.Tensor, alpha: torch.Tensor, order: int) -> torch.Tensor:
    k = torch.arange(5, device=q.device, dtype=q.dtype)
    factor = k if order == 1 else k * (k - 1)
    coeff = (q * factor)[..., order:]
    powers = alpha.unsqueeze(-1) ** torch.arange(5 - order, device=q.device, dtype=q.dtype)
    return (powers * coeff.unsqueeze(-2)).sum(-1)


def fit_alpha(
    R: torch.Tensor,
    S: torch.Tensor | None,
    degree: int = 5,
    *,
    bounds: tuple[float, float] | None = None,
    solver: str = "exact",
    grid_points: int = 65,
) -> torch.Tensor:
    """α minimising ``‖h(R; α) S‖_F²`` over ``bounds`` (default :data:`ALPHA_BOUNDS`), per matrix.

    ``S=None`` is the exact fit ``Σ_i h(r_i; α)²`` over the eigenvalues of a symmetric ``R`` (for a
    non-symmetric one pass ``S = I``). Returns a float64 tensor of shape ``R.shape[:-2]``.
    """
    degree = check_degree(degree)
    order = residual_polynomials(degree).shape[1] - 1
    if S is None:
        M = power_hankel(torch.linalg.eigvalsh(R.double()), order)
    else:
        M = krylov_gram(R, S, order)
    q = objective_coefficients(M, degree)
    return minimize_quartic(q, bounds or ALPHA_BOUNDS[degree], solver, grid_points)
