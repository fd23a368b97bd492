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


def krylov_gram(
    R: torch.Tensor,
    S: torch.Tensor,
    order: int,
    *,
    squared: torch.Tensor | None = None,
    symmetric: bool = False,
) -> torch.Tensor:
    """``M_ij = ⟨R^i S, R^j S⟩_F`` for ``0 ≤ i, j ≤ order``, batched over ``R``'s leading dims, in float64.

    ``S`` is ``(n, p)`` (shared by the batch) or ``(..., n, p)``. The products run in ``R``'s dtype (at
    least float32); only the ``(order+1)²`` inner products are accumulated in float64. ``squared``
    (``R @ R``, which a degree-5 step computes anyway) halves the number of thin products;
    ``symmetric`` says ``R = Rᵀ`` (saves a transpose, nothing else).
    """
    rows = KrylovRows(S, R.shape[:-2].numel(), order, R.dtype, squared is not None, symmetric)
    return rows.gram(R, squared).reshape(*R.shape[:-2], order + 1, order + 1)


class KrylovRows:
    """The rows ``W_j = (R^j S)ᵀ``, ``j = 0..order``, of one PRISM run's sketched fits, in one buffer.

    Built once per run (the sketch rows ``W_0 = Sᵀ`` are written once, every product's operand and
    output views are made once); :meth:`gram` then costs the products and one float64 Gram per
    iteration. Rows, not columns: each product is ``W Rᵀ`` with a wide ``p×n`` left operand (torch's
    CPU matmul is several times slower on a thin ``n×p`` right operand). With ``squared`` (``R²``
    handed in at each :meth:`gram`) the rows come two at a time, ``[W_{j+2}; W_{j+3}] = [W_j;
    W_{j+1}] (R²)ᵀ``: degree 5's six rows cost three products, not five.
    """

    def __init__(
        self,
        S: torch.Tensor,
        batch: int,
        order: int,
        dtype: torch.dtype,
        squared: bool,
        symmetric: bool,
    ) -> None:
        n, p = S.shape[-2], S.shape[-1]
        self.n, self.order, self.symmetric = n, order, symmetric
        self.dtype = dtype if dtype in (torch.float32, torch.float64) else torch.float32
        K = torch.empty(batch, (order + 1) * p, n, dtype=self.dtype, device=S.device)
        K[:, :p] = S.to(self.dtype).reshape(-1, n, p).mT
        self.lone = batch == 1  # the optimizers' usual bucket: plain 2-D products
        self.K = K[0] if self.lone else K
        self.shape = (*self.K.shape[:-2], n, n)  # an operand's shape (the loop's residuals)
        self.vectors = K.view(batch, order + 1, p * n)
        # (source rows, product with R² rather than R, destination rows) for each product.
        self.products: list[tuple[torch.Tensor, bool, torch.Tensor]] = []
        have = 1  # rows W_0 .. W_{have-1} are filled
        while have <= order:
            by_square = squared and have >= 2
            src, take = (have - 2, min(2, order + 1 - have)) if by_square else (have - 1, 1)
            block = (self.K.narrow(-2, src * p, take * p), by_square)
            self.products.append((*block, self.K.narrow(-2, have * p, take * p)))
            have += take
        if S.device.type == "cpu":
            # The host fit's workspace, made once: the rows' float64 copy, the Grams and a NumPy
            # view of them, so an iteration's fit allocates nothing and converts nothing.
            self.wide = torch.empty(batch, order + 1, p * n, dtype=torch.float64)
            self.grams = torch.empty(batch, order + 1, order + 1, dtype=torch.float64)
            self.host_grams = self.grams.numpy().reshape(batch, (order + 1) ** 2)

    def fill(self, R: torch.Tensor, squared: torch.Tensor | None = None) -> torch.Tensor:
        """Compute the rows for residual ``R`` (and ``R²``); returns them as ``(B, order+1, p·n)``."""
        mm: Any = torch.mm if self.lone else torch.bmm
        operands = [self._operand(R)]
        if squared is not None:
            operands.append(self._operand(squared))
        for src, by_square, dst in self.products:
            mm(src, operands[by_square], out=dst)
        return self.vectors

    def gram(self, R: torch.Tensor, squared: torch.Tensor | None = None) -> torch.Tensor:
        """``M_ij = ⟨W_i, W_j⟩_F`` in float64, shape ``(B, order+1, order+1)``."""
        K = self.fill(R, squared).double()
        return K @ K.mT

    def alpha(
        self,
        R: torch.Tensor,
        squared: torch.Tensor | None,
        degree: int,
        bounds: tuple[float, float],
        solver: str = "exact",
        grid_points: int = 65,
    ) -> torch.Tensor:
        """The fitted α per matrix, float64 ``(B,)``: :func:`fit_alpha` with this run's buffer (on
        the CPU through :meth:`alpha_host`)."""
        if R.device.type != "cpu":
            return alpha_from_gram(self.gram(R, squared), degree, bounds, solver, grid_points)
        return torch.from_numpy(self.alpha_host(R, squared, degree, bounds, solver, grid_points))

    def alpha_host(
        self,
        R: torch.Tensor,
        squared: torch.Tensor | None,
        degree: int,
        bounds: tuple[float, float],
        solver: str = "exact",
        grid_points: int = 65,
    ) -> np.ndarray:
        """The fitted α of every matrix of the batch as a float64 NumPy ``(B,)``, for CPU tensors.

        One call for the whole batch: the products fill the rows (batched ``bmm``), then the
        float64 Grams of all ``B`` matrices are one ``bmm`` into the run's workspace, and
        :func:`minimize_from_grams` takes the quartics' coefficients and minima over the batch in
        NumPy and Python floats (torch's per-op cost on a 6×6 Gram is most of a small PRISM step).
        Same arithmetic as :func:`fit_alpha` (tested to round-off).
        """
        self.wide.copy_(self.fill(R, squared))  # float32 rows → float64, in place
        torch.bmm(self.wide, self.wide.mT, out=self.grams)
        with np.errstate(all="ignore"):  # a diverging iterate: α is moot, its warnings too
            return minimize_from_grams(self.host_grams, degree, bounds, solver, grid_points)

    def _operand(self, A: torch.Tensor) -> torch.Tensor:
        if A.dtype != self.dtype:
            A = A.to(self.dtype)
        A = A.view(self.n, self.n) if self.lone and A.is_contiguous() else A.reshape(self.shape)
        return A if self.symmetric else A.mT  # W_{j+1} = W_j Rᵀ


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
    point is kept only if it lowers ``Q``. An exactly flat objective (a converged iterate) gives
    ``lo``, the classic coefficient; between two minima of equal depth the pick is whichever basin
    has the lower grid point, so it can be either. On an accelerator this is a handful of tiny tensor
    ops with no host synchronisation; on the CPU the same code runs in NumPy, whose per-op cost on five numbers is
    a fraction of torch's.
    """
    lo, hi = bounds
    if solver not in ALPHA_SOLVERS:
        raise ValueError(f"alpha_solver must be one of {ALPHA_SOLVERS}, got {solver!r}")
    if grid_points < 2:
        raise ValueError(f"alpha_grid_points must be >= 2, got {grid_points}")
    if q.device.type == "cpu":
        alpha = minimize_quartic_numpy(q.double().numpy(), bounds, solver, grid_points)
        return torch.from_numpy(alpha)
    # A diverging iterate has non-finite traces: its α is irrelevant, keep the arithmetic finite.
    q = torch.nan_to_num(q.double(), nan=0.0, posinf=0.0, neginf=0.0)
    grid_t, powers_t = _grid_torch(lo, hi, grid_points, q.device)
    return _grid_newton(torch, q, grid_t, powers_t, lo, hi, solver == "exact")


def minimize_quartic_numpy(
    q: np.ndarray, bounds: tuple[float, float], solver: str, grid_points: int
) -> np.ndarray:
    """:func:`minimize_quartic` on the host: the grid scan is one NumPy product; the Newton steps run
    on Python floats for a few matrices (NumPy's per-op cost on five numbers would dominate), in
    NumPy for more. Same grid, same steps as the device code (tested against each other)."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        return _minimize_rows(q.reshape(-1, 5), bounds, solver, grid_points).reshape(q.shape[:-1])


def _minimize_rows(
    rows: np.ndarray, bounds: tuple[float, float], solver: str, grid_points: int
) -> np.ndarray:
    """:func:`minimize_quartic_numpy` on ``(B, 5)`` coefficients, inside the caller's ``errstate``."""
    lo, hi = bounds
    if not np.isfinite(rows).all():  # a diverging iterate: its α is moot, keep arithmetic finite
        rows = np.nan_to_num(rows, nan=0.0, posinf=0.0, neginf=0.0)
    grid, powers = _grid_numpy(lo, hi, grid_points)
    if len(rows) > _SCALAR_BATCH:
        return np.asarray(_grid_newton(np, rows, grid, powers, lo, hi, solver == "exact"))
    best = grid[np.argmin(rows @ powers, -1)]  # first minimum: ties go to lo
    if solver != "exact":
        return best
    pairs = zip(rows.tolist(), best.tolist(), strict=True)
    return np.array([_newton_scalar(row, b, lo, hi) for row, b in pairs])


def minimize_from_grams(
    grams: np.ndarray, degree: int, bounds: tuple[float, float], solver: str, grid_points: int
) -> np.ndarray:
    """:func:`alpha_from_gram` on the host for flattened Grams ``(B, width²)``, float64 ``(B,)``.

    For a few matrices one product with :func:`quartic_and_grid` gives each quartic's coefficients
    and its values on the grid at once; the argmin and the Newton steps then run on Python floats
    (a small PRISM step is dominated by per-call costs, not arithmetic). Same grid, same steps as
    :func:`minimize_quartic`; the grid values differ from ``q @ powers`` by round-off only.
    """
    lo, hi = bounds
    if len(grams) > _SCALAR_BATCH:
        return _minimize_rows(grams @ objective_map(degree), bounds, solver, grid_points)
    table, grid = quartic_and_grid(degree, lo, hi, grid_points)
    alphas = []
    for row in (grams @ table).tolist():
        q, values = row[:5], row[5:]
        if not math.isfinite(sum(q)):  # a diverging iterate: the guarded general path
            alphas.append(_minimize_rows(np.array([q]), bounds, solver, grid_points)[0])
            continue
        best = grid[values.index(min(values))]  # first minimum: ties go to lo
        alphas.append(_newton_scalar(q, best, lo, hi) if solver == "exact" else best)
    return np.array(alphas)


@functools.lru_cache(maxsize=64)
def quartic_and_grid(
    degree: int, lo: float, hi: float, points: int
) -> tuple[np.ndarray, list[float]]:
    """``([W | W·powers], grid)``: ``vec(M)`` times the table is the quartic's ``(q0..q4)`` followed
    by ``Q`` at each grid point (see :func:`objective_map`, :func:`minimize_quartic`)."""
    W = objective_map(degree)
    grid, powers = _grid_numpy(lo, hi, points)
    return np.concatenate([W, W @ powers], axis=1), grid.tolist()


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


_SCALAR_BATCH = 4  # up to this many matrices per call, the CPU Newton steps run on Python floats


def _newton_scalar(q: list[float], best: float, lo: float, hi: float) -> float:
    """:func:`_grid_newton`'s Newton refinement for one matrix on Python floats, from the grid's
    ``best`` (same steps, same safeguard)."""
    _, q1, q2, q3, q4 = q

    def objective(a: float) -> float:  # Q(α) − q0
        return (((q4 * a + q3) * a + q2) * a + q1) * a

    alpha = best
    for _ in range(_NEWTON_STEPS):
        slope = ((4 * q4 * alpha + 3 * q3) * alpha + 2 * q2) * alpha + q1
        curvature = (12 * q4 * alpha + 6 * q3) * alpha + 2 * q2
        if curvature > 0:
            alpha = min(max(alpha - slope / curvature, lo), hi)
    return alpha if objective(alpha) < objective(best) else best


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
    squared: torch.Tensor | None = None,
    symmetric: bool = False,
) -> torch.Tensor:
    """α minimising ``‖h(R; α) S‖_F²`` over ``bounds`` (default :data:`ALPHA_BOUNDS`), per matrix.

    ``S=None`` is the exact fit ``Σ_i h(r_i; α)²`` over the eigenvalues of a symmetric ``R`` (for a
    non-symmetric one pass ``S = I``). ``squared`` and ``symmetric`` are passed to
    :func:`krylov_gram` (the PRISM loop hands over the ``R²`` its step needs). Returns a float64
    tensor of shape ``R.shape[:-2]``.
    """
    degree = check_degree(degree)
    order = krylov_order(degree)
    if S is None:
        M = power_hankel(torch.linalg.eigvalsh(R.double()), order)
    else:
        M = krylov_gram(R, S, order, squared=squared, symmetric=symmetric)
    return alpha_from_gram(M, degree, bounds or ALPHA_BOUNDS[degree], solver, grid_points)


def krylov_order(degree: int) -> int:
    """Highest power ``j`` of ``R^j S`` the fit needs: ``deg h`` (5 for degree 5, 3 for degree 3)."""
    return residual_polynomials(degree).shape[1] - 1


def alpha_from_gram(
    M: torch.Tensor, degree: int, bounds: tuple[float, float], solver: str, grid_points: int
) -> torch.Tensor:
    """The fitted α per matrix from the Krylov Gram ``M`` (``(..., order+1, order+1)``), float64."""
    q = objective_coefficients(M, degree)
    return minimize_quartic(q, bounds, solver, grid_points).reshape(M.shape[:-2])
