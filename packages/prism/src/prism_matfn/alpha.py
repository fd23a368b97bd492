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
import math
from typing import Any, Literal

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
    K = _krylov_vectors(R, S, order).double()
    return (K @ K.mT).reshape(*R.shape[:-2], order + 1, order + 1)


def _krylov_vectors(R: torch.Tensor, S: torch.Tensor, order: int) -> torch.Tensor:
    """``vec(R^j S)`` for ``j = 0..order`` as rows, shape ``(B, order+1, n·p)`` in ``R``'s dtype."""
    work = R if R.dtype in (torch.float32, torch.float64) else R.float()
    lead, n = work.shape[:-2], work.shape[-1]
    flat = work.reshape(-1, n, n)
    V = S.to(work.dtype)
    # Columns R^j S by contiguous products: a lone matrix (the optimizers' usual bucket) runs as 2-D
    # matmuls, a batch as bmm on a materialised sketch. A broadcast (stride-0) sketch or a transposed
    # operand sends torch's CPU matmul down a path many times slower at these sizes.
    if flat.shape[0] == 1:
        R2, V = flat[0], V.reshape(n, V.shape[-1])
    else:
        R2, V = flat, V.expand(*lead, n, V.shape[-1]).reshape(-1, n, V.shape[-1])
    vectors = [V]
    for _ in range(order):
        vectors.append(R2 @ vectors[-1])
    return torch.stack(vectors, dim=-3).flatten(-2).reshape(-1, order + 1, n * V.shape[-1])


def power_hankel(eigenvalues: torch.Tensor, order: int) -> torch.Tensor:
    """``M_ij = Σ_l r_l^{i+j}``: the exact (unsketched) Krylov Gram of a symmetric ``R`` from its eigenvalues."""
    r = eigenvalues.double()
    V = r.unsqueeze(-1) ** torch.arange(
        order + 1, device=r.device, dtype=r.dtype
    )  # (..., n, order+1)
    return V.mT @ V


def objective_coefficients(M: torch.Tensor, degree: int) -> torch.Tensor:
    """Coefficients ``(q0, …, q4)`` of ``Q(α) = Σ_k q_k α^k = ‖h(R; α) S‖_F²`` from the Krylov Gram ``M``."""
    W = _objective_map_on(degree, M.dtype, M.device)
    width = residual_polynomials(degree).shape[1]
    if M.shape[-1] != width or M.shape[-2] != width:
        raise ValueError(f"degree {degree} needs a {width}×{width} Krylov Gram, got {M.shape}")
    return M.flatten(-2) @ W  # one small matmul: q is linear in M


@functools.cache
def objective_map(degree: int) -> np.ndarray:
    """``W`` with ``q = vec(M) @ W``: ``q_k = Σ_{a+b=k} H_aᵀ M H_b``, of shape ``(width², 5)``."""
    H = residual_polynomials(degree)
    width = H.shape[1]
    W = np.zeros((width, width, 5))
    for a in range(3):
        for b in range(3):
            W[:, :, a + b] += np.outer(H[a], H[b])
    return W.reshape(width * width, 5)


@functools.lru_cache(maxsize=32)
def _objective_map_on(degree: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return torch.as_tensor(objective_map(degree), dtype=dtype, device=device)


def minimize_quartic(
    q: torch.Tensor,
    bounds: tuple[float, float],
    solver: str = "exact",
    grid_points: int = 65,
) -> torch.Tensor:
    """``argmin_{α ∈ [lo, hi]} Q(α)`` for each row of ``q`` (shape ``(..., 5)``), as float64.

    ``"grid"``: the author's uniform grid of ``grid_points`` (endpoints included). ``"exact"``: the same
    grid, then safeguarded Newton steps on ``Q'`` from the best grid point (a quartic has at most two
    minima, so the grid resolves the basins and Newton converges quadratically inside one); the refined
    point is kept only if it lowers ``Q``. Ties (a flat objective, e.g. a converged iterate) go to
    ``lo``, the classic coefficient. On an accelerator this is a handful of tiny tensor ops with no
    host synchronisation; on the CPU the same code runs in NumPy, whose per-op cost on five numbers is
    a fraction of torch's.
    """
    lo, hi = bounds
    if solver not in ALPHA_SOLVERS:
        raise ValueError(f"alpha_solver must be one of {ALPHA_SOLVERS}, got {solver!r}")
    if grid_points < 2:
        raise ValueError(f"alpha_grid_points must be >= 2, got {grid_points}")
    # A diverging iterate has non-finite traces: its α is irrelevant, keep the arithmetic finite.
    if q.device.type == "cpu" and q.numel() <= 5 * _SCALAR_BATCH:
        # A few matrices: plain Python floats beat NumPy's per-call overhead on five numbers.
        rows = q.double().reshape(-1, 5).tolist()
        grid_list = _grid_list(lo, hi, grid_points)
        alphas = [_grid_newton_scalar(row, grid_list, lo, hi, solver == "exact") for row in rows]
        return torch.tensor(alphas, dtype=torch.float64).reshape(q.shape[:-1])
    q = torch.nan_to_num(q.double(), nan=0.0, posinf=0.0, neginf=0.0)
    if q.device.type == "cpu":
        grid, powers = _grid_numpy(lo, hi, grid_points)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            alpha = _grid_newton(np, q.numpy(), grid, powers, lo, hi, solver == "exact")
        return torch.from_numpy(np.asarray(alpha, dtype=np.float64))
    grid_t, powers_t = _grid_torch(lo, hi, grid_points, q.device)
    return _grid_newton(torch, q, grid_t, powers_t, lo, hi, solver == "exact")


_NEWTON_STEPS = 2  # from a 65-point grid: error ≲ 1e-2 → ~1e-4 → ~1e-8 (α needs no more)


def _grid_newton(
    xp: Any, q: Any, grid: Any, powers: Any, lo: float, hi: float, refine: bool
) -> Any:
    """Grid argmin, then Newton on ``Q'``; ``xp`` is ``numpy`` or ``torch`` (the calls are shared)."""
    best = grid[xp.argmin(q @ powers, -1)]
    if not refine:
        return best
    q1, q2, q3, q4 = q[..., 1], q[..., 2], q[..., 3], q[..., 4]
    alpha = best
    for _ in range(_NEWTON_STEPS):
        slope = ((4 * q4 * alpha + 3 * q3) * alpha + 2 * q2) * alpha + q1
        curvature = (12 * q4 * alpha + 6 * q3) * alpha + 2 * q2
        alpha = xp.clip(xp.where(curvature > 0, alpha - slope / curvature, alpha), lo, hi)

    def objective(a: Any) -> Any:  # Q(α) − q0
        return (((q4 * a + q3) * a + q2) * a + q1) * a

    return xp.where(objective(alpha) < objective(best), alpha, best)


_SCALAR_BATCH = 4  # up to this many matrices per call, the CPU solve runs on Python floats


def _grid_newton_scalar(
    q: list[float], grid: list[float], lo: float, hi: float, refine: bool
) -> float:
    """:func:`_grid_newton` for one matrix on Python floats (same grid, same Newton steps)."""
    _, q1, q2, q3, q4 = (v if math.isfinite(v) else 0.0 for v in q)

    def objective(a: float) -> float:  # Q(α) − q0
        return (((q4 * a + q3) * a + q2) * a + q1) * a

    values = [objective(a) for a in grid]
    best = grid[values.index(min(values))]  # first minimum: ties go to lo, as argmin
    if not refine:
        return best
    alpha = best
    for _ in range(_NEWTON_STEPS):
        slope = ((4 * q4 * alpha + 3 * q3) * alpha + 2 * q2) * alpha + q1
        curvature = (12 * q4 * alpha + 6 * q3) * alpha + 2 * q2
        if curvature > 0:
            alpha = min(max(alpha - slope / curvature, lo), hi)
    return alpha if objective(alpha) < objective(best) else best


@functools.lru_cache(maxsize=64)
def _grid_list(lo: float, hi: float, points: int) -> list[float]:
    return np.linspace(lo, hi, points).tolist()


@functools.lru_cache(maxsize=64)
def _grid_numpy(lo: float, hi: float, points: int) -> tuple[np.ndarray, np.ndarray]:
    grid = np.linspace(lo, hi, points)
    return grid, grid ** np.arange(5)[:, None]


@functools.lru_cache(maxsize=64)
def _grid_torch(
    lo: float, hi: float, points: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    grid = torch.linspace(lo, hi, points, dtype=torch.float64, device=device)
    return grid, grid ** torch.arange(5, dtype=torch.float64, device=device).unsqueeze(-1)


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
    elif R.device.type == "cpu" and R.shape[:-2].numel() <= _SCALAR_BATCH:
        # A few CPU matrices: the float64 Gram and the quartic's coefficients in NumPy (a fraction of
        # torch's per-op cost at 6×6), the same arithmetic as krylov_gram + objective_coefficients.
        K = _krylov_vectors(R, S, order).numpy().astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):  # a diverging iterate: α is moot
            q_np = np.einsum("bip,bjp->bij", K, K).reshape(len(K), -1) @ objective_map(degree)
        q = torch.from_numpy(q_np).reshape(*R.shape[:-2], 5)
        return minimize_quartic(q, bounds or ALPHA_BOUNDS[degree], solver, grid_points)
    else:
        M = krylov_gram(R, S, order)
    q = objective_coefficients(M, degree)
    return minimize_quartic(q, bounds or ALPHA_BOUNDS[degree], solver, grid_points)
