"""The PPAI estimating equation, its solution, plug-in covariance and power tuning (pure functions).

For one target with weights ``w_t`` on the T labeled rounds (``ρ_t = ν(A_t|X_t)/π_t(A_t|X_t)`` for
IPW) and target arm weights ``ν(a|x̃_j)`` on the N unlabeled contexts, the equation is ([R], spec §2.2)

    Ψ_λ(θ) = λ s (1/N) Σ_j Σ_a ν(a|x̃_j) ψ(θ; x̃_j, f(x̃_j, a)) + (1/T) Σ_t w_t [ψ(θ; X_t, Y_t) − λ ψ(θ; X_t, f_t)]

with ``s = 1`` for IPW (``s = mean(w)`` for the square-root stabilised weights, see
:mod:`ppai.weighting`). λ may be a vector: coordinate k of Ψ then uses λ_k. The equation is a sum of
*groups* ``(X, Y, c, λ_g)`` each contributing ``λ_g ⊙ (1/n_g) Σ_i c_i ψ(θ; x_i, y_i)``: the labeled
outcomes (λ_g = 1), the labeled predictions (λ_g = −λ) and one group per target arm on the unlabeled
pool (λ_g = λ).

Covariance (spec §2.3): ``Cov(θ̂) = H⁻¹ [V_L(λ) + (T/N) Λ V_U Λ] H⁻ᵀ / T`` with
``V_L(λ) = Cov_t(a_t − Λ b_t)``, ``a_t = w_t ψ^Y_t``, ``b_t = w_t ψ^f_t`` (centred sample covariances,
``ddof=1`` as ``ppi_py``), ``V_U`` the covariance of the unlabeled scores and ``H`` the population
Jacobian. Several targets stack into one θ; their blocks share the rounds and the pool, so the joint
covariance gives contrasts such as treatment effects.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from ppai.problems import Array, MeanProblem, ZProblem, check_invertible, problem_name

Group = tuple[Array | None, Array, Array, Array]


@dataclasses.dataclass(frozen=True)
class Block:
    """One target's arrays, ready for the maths.

    ``X``/``Y``/``f``/``w``: labeled contexts ``(T, p)`` (or ``None``), outcomes, predictions for the
    played arm and weights, all length T. ``X_u``: unlabeled contexts ``(N, p)`` or ``None``;
    ``f_u``/``nu_u``: for each arm the target puts weight on, its predictions and ν weights on the pool
    (length N each). ``s``: scale of the unlabeled term. ``centre``: whether the influence of a labeled
    prediction is taken about the unlabeled mean (square-root stabilised weights). ``f_lc``/``nu_lc``:
    with ``include_labeled_contexts``, the predictions and ν weights for the target's arms on the
    *labeled* contexts, which then join the pool with weight ``s_lc = T/(N + T)`` (and ``s = N/(N + T)``).
    """

    X: Array | None
    Y: Array
    f: Array
    w: Array
    X_u: Array | None
    f_u: tuple[Array, ...]
    nu_u: tuple[Array, ...]
    s: float = 1.0
    centre: bool = False
    f_lc: tuple[Array, ...] = ()
    nu_lc: tuple[Array, ...] = ()
    s_lc: float = 0.0

    @property
    def n_labeled(self) -> int:
        """T, the number of labeled rounds."""
        return int(self.Y.shape[0])

    @property
    def n_unlabeled(self) -> int:
        """N, the number of unlabeled contexts (0 without a pool)."""
        return int(self.f_u[0].shape[0]) if self.f_u else 0

    @functools.cached_property
    def unit_nu(self) -> bool:
        """One pool arm with ν ≡ 1 (a target arm): its ν array need not be multiplied in."""
        return len(self.nu_u) == 1 and bool(np.all(self.nu_u[0] == 1.0))

    @functools.cached_property
    def unit_weights(self) -> bool:
        """All labeled weights 1 (no adaptivity, or the PPI++-ignoring-adaptivity baseline)."""
        return bool(np.all(self.w == 1.0))

    @functools.cached_property
    def pool_sums(self) -> tuple[float, float, float, float, float]:
        """For the mean, whose pool score ``u_j = g_j − h_j θ`` is affine in θ (``g = s Σ_a ν_a f_a``,
        ``h = s Σ_a ν_a``): ``(Σ g, Σ h, Σ g², Σ g h, Σ h²)``, one pass over the pool for every θ."""
        h: Array | None = None
        if self.unit_nu:
            g: Array = self.f_u[0] if self.s == 1.0 else self.s * self.f_u[0]  # no copy at s = 1
        else:
            g = self.s * np.sum([nu * f for f, nu in zip(self.f_u, self.nu_u, strict=True)], axis=0)
            h = self.s * np.sum(self.nu_u, axis=0)
        if h is None:
            n = float(self.n_unlabeled)
            return float(g.sum()), self.s * n, float(g @ g), self.s * float(g.sum()), self.s**2 * n
        return float(g.sum()), float(h.sum()), float(g @ g), float(g @ h), float(h @ h)


def groups(block: Block, lam: Array) -> list[Group]:
    """The groups whose sum is Ψ_λ (see the module docstring); ``lam`` has length d."""
    out: list[Group] = [(block.X, block.Y, block.w, np.ones_like(lam))]
    if np.any(lam != 0):
        out.append((block.X, block.f, block.w, -lam))
        out += [
            (block.X_u, f, nu if block.s == 1.0 else block.s * nu, lam)
            for f, nu in zip(block.f_u, block.nu_u, strict=True)
            if block.n_unlabeled
        ]
        out += [
            (block.X, f, block.s_lc * nu, lam)
            for f, nu in zip(block.f_lc, block.nu_lc, strict=True)
        ]
    return out


def equation(problem: ZProblem, groups_: list[Group], theta: Array) -> Array:
    """Ψ(θ) = Σ_g λ_g ⊙ (1/n_g) Σ_i c_i ψ(θ; x_i, y_i)."""
    total = np.zeros_like(theta, dtype=float)
    # ``score_sum(θ, X, Y, c) = c @ ψ(θ; X, Y)`` without the (n, d) score array, where a problem has it.
    score_sum = getattr(problem, "score_sum", None)
    for X, Y, c, lam in groups_:
        s = c @ problem.psi(theta, X, Y) if score_sum is None else score_sum(theta, X, Y, c)
        total += lam * s / Y.shape[0]
    return total


def equation_jacobian(problem: ZProblem, groups_: list[Group], theta: Array) -> Array:
    """∂Ψ/∂θ, from the problem's per-group Jacobians.

    When ∂ψ does not involve y, the labeled outcome and prediction groups share one Jacobian (same
    contexts and weights): it is computed once with their λs summed, and not at all when they cancel
    (λ = 1).
    """
    merged: list[Group] = []
    for g in groups_:
        if not getattr(problem, "jacobian_uses_y", True):
            same = [i for i, m in enumerate(merged) if m[0] is g[0] and m[2] is g[2]]
            if same:
                X, Y, c, lam = merged[same[0]]
                merged[same[0]] = (X, Y, c, lam + g[3])
                continue
        merged.append(g)
    total = np.zeros((theta.shape[0], theta.shape[0]))
    for X, Y, c, lam in merged:
        if np.any(lam != 0):
            total += lam[:, None] * problem.jacobian(theta, X, Y, c)
    return total


def newton_solve(
    problem: ZProblem, groups_: list[Group], theta0: Array, tol: float = 1e-10, max_iter: int = 50
) -> Array:
    """Root of Ψ by Newton's method with backtracking on ‖Ψ‖ (exact in one step for linear ψ).

    Converged when the full step is below ``tol`` relative to θ (a step cut short by the line
    search proves nothing). The Jacobian, a pass over every row, is kept while full steps shrink ‖Ψ‖
    at least fourfold (a chord step) and recomputed otherwise; when the converging step used a kept
    Jacobian, the last step is taken with a fresh one (a true Newton step, quadratically accurate).
    """
    theta = np.asarray(theta0, dtype=float).copy()
    psi = equation(problem, groups_, theta)
    J: Array | None = None
    for _ in range(max_iter):
        fresh = J is None
        if J is None:
            J = equation_jacobian(problem, groups_, theta)
            check_invertible(problem, J, "Jacobian")
        step = np.linalg.solve(J, psi)
        if np.linalg.norm(step) <= tol * (1 + np.linalg.norm(theta)):
            if not fresh:  # a chord step is only linearly accurate: finish with a Newton step
                step = np.linalg.solve(equation_jacobian(problem, groups_, theta), psi)
            return theta - step
        t, norm = 1.0, float(np.linalg.norm(psi))
        while True:
            candidate = theta - t * step
            new_psi = equation(problem, groups_, candidate)
            if np.linalg.norm(new_psi) <= (1 - 1e-4 * t) * norm or t < 1e-6:
                break
            t /= 2
        if t < 1.0 or np.linalg.norm(new_psi) > 0.25 * norm:
            J = None
        theta, psi = candidate, new_psi
    reason = getattr(problem, "nonconvergence_reason", "the equation may have no root")
    raise RuntimeError(
        f"Newton's method for the {problem_name(problem)} problem did not converge in {max_iter} "
        f"iterations (‖Ψ‖ = {np.linalg.norm(psi):.3g}, ‖θ‖ = {np.linalg.norm(theta):.3g}): "
        f"likely {reason}"
    )


def _mean_solve(problem: MeanProblem, block: Block, lam: float) -> Array:
    """:meth:`MeanProblem.solve` with the pool group's sums ``Σ_j c_j f_j = Σ g`` and ``Σ_j c_j =
    Σ h`` taken from :attr:`Block.pool_sums`, which the fit reads once for every λ."""
    T, N = block.n_labeled, block.n_unlabeled
    sw = float(block.w.sum())
    num = float(block.w @ block.Y) / T
    den = sw / T
    if lam != 0.0:
        sg, sh = block.pool_sums[:2]
        num += lam * (sg / N - float(block.w @ block.f) / T)
        den += lam * (sh / N - sw / T)
    check_invertible(problem, np.array([[den]]), "Jacobian")
    return np.array([num / den])


def solve(problem: ZProblem, block: Block, lam: Array, theta0: Array | None = None) -> Array:
    """θ̂_λ for one block: the problem's own ``solve`` (closed forms, quantile) or Newton."""
    if type(problem) is MeanProblem and block.n_unlabeled and not block.f_lc:
        return _mean_solve(problem, block, float(lam[0]))
    groups_ = groups(block, lam)
    custom = getattr(problem, "solve", None)
    if custom is not None:
        return np.asarray(custom(groups_), dtype=float)
    if theta0 is None:
        theta0 = problem.init(block.X, block.Y, block.w)
    return newton_solve(problem, groups_, theta0)


@dataclasses.dataclass(frozen=True)
class ScoreStats:
    """Plug-in statistics at a fixed θ, stacked over targets (dimension D = Σ d_b).

    ``C_aa``, ``C_ab``, ``C_bb``: centred covariances (``ddof=1``) of the weighted labeled scores
    ``a_t = w_t ψ^Y_t`` and ``b_t = w_t ψ^f_t``; ``V_U``: covariance of ``s ψ̃_j`` on the pool;
    ``H``: the population Jacobian (pooled for λ ≠ 0, labeled for λ = 0, see :func:`block_jacobian`); ``T``, ``N``:
    sample sizes. ``V_pooled``: the covariance of the labeled and unlabeled prediction scores taken
    as one sample (``ppi_py``'s estimate), or ``None`` when the two samples do not share a law
    (non-unit weights: any adaptivity).
    """

    C_aa: Array
    C_ab: Array
    C_bb: Array
    V_U: Array
    H: Array
    T: int
    N: int
    V_pooled: Array | None = None

    @property
    def H_inv(self) -> Array:
        """``H⁻¹``, shared by the covariance and the tuning."""
        return np.asarray(np.linalg.inv(self.H), dtype=float)


def _moments(u: Array) -> tuple[Array, Array]:
    """Sum and Gram ``(Σ u_i, uᵀu)`` of the rows, in one pass of BLAS (no centred copy)."""
    return u.sum(0), u.T @ u


def _cross_cov(n: int, su: Array, sv: Array, uv: Array) -> Array:
    """``ddof=1`` covariance from sums and the cross-product: ``(uᵀv − n ū v̄ᵀ) / (n − 1)``."""
    return (uv - np.outer(su, sv) / n) / (n - 1)


def _exchangeable(block: Block) -> bool:
    """Whether labeled and pool prediction scores share a law: unit weights, one pool arm, ν ≡ 1."""
    return (
        len(block.f_u) == 1
        and not block.f_lc
        and not block.centre
        and block.s == 1.0
        and block.unit_weights
        and block.unit_nu
    )


def _mean_pool_moments(block: Block, theta: Array) -> tuple[Array, Array]:
    """Sum and Gram of the mean's pool scores ``g − h θ`` from :attr:`Block.pool_sums`."""
    sg, sh, gg, gh, hh = block.pool_sums
    t = float(theta[0])
    return np.array([sg - t * sh]), np.array([[gg - 2 * t * gh + t * t * hh]])


def _block_stats(
    problem: ZProblem, block: Block, theta: Array, with_pool: bool, pooled_h: bool
) -> tuple[Array, Array, Array | None, Array]:
    """Labeled scores ``a``, ``b``, pool scores ``u`` (``None`` when not needed) and H."""
    X, w = block.X, block.w
    a = w[:, None] * problem.psi(theta, X, block.Y)
    psi_f = problem.psi(theta, X, block.f)
    u: Array | None = None
    if block.n_unlabeled and (with_pool or block.centre):
        u = block.s * problem.psi(theta, block.X_u, block.f_u[0])
        if not block.unit_nu:
            u *= block.nu_u[0][:, None]
        for f, nu in zip(block.f_u[1:], block.nu_u[1:], strict=True):
            u += block.s * nu[:, None] * problem.psi(theta, block.X_u, f)
    # Square-root stabilised weights: the rectifier's influence is w_t (ψ^f_t − ψ̃̄), see weighting.py.
    if block.centre and u is not None:
        psi_f = psi_f - u.mean(0) / block.s
    b = w[:, None] * psi_f
    if block.f_lc:
        # Labeled contexts in the pool: round t also contributes s_lc Σ_a ν ψ(θ; X_t, f(X_t, a)).
        for f, nu in zip(block.f_lc, block.nu_lc, strict=True):
            b -= block.s_lc * nu[:, None] * problem.psi(theta, X, f)
    return a, b, u, block_jacobian(problem, block, theta, pooled=pooled_h)


def block_jacobian(problem: ZProblem, block: Block, theta: Array, pooled: bool = True) -> Array:
    """The estimate of the population Jacobian H.

    For λ ≠ 0 (``pooled``), when ∂ψ does not involve y (mean, OLS, logistic) it is averaged over
    all T + N contexts, as PPI++ does: ``(T H_L + N H_U) / (T + N)`` (with
    ``include_labeled_contexts`` the pool already spans every context). For λ = 0
    (``pooled=False``), otherwise, or without a pool, it is the labeled ``H_L``: the labeled-only
    estimator is then the classical one, the same with or without a pool (:func:`ppai.ipw_ci`) and
    ``ppi_py``'s at λ = 0.
    """
    X, w = block.X, block.w
    H_L = problem.jacobian(theta, X, block.Y, w)
    if not pooled or not block.n_unlabeled or getattr(problem, "jacobian_uses_y", True):
        return np.asarray(H_L, dtype=float)
    if type(problem) is MeanProblem:
        H_U = np.array([[-block.pool_sums[1] / block.n_unlabeled]])  # −(1/N) Σ_j s Σ_a ν_a
    else:
        H_U = np.sum(
            [
                problem.jacobian(theta, block.X_u, f, nu if block.s == 1.0 else block.s * nu)
                for f, nu in zip(block.f_u, block.nu_u, strict=True)
            ],
            axis=0,
        )
    if block.f_lc:
        # The pool already spans every context, weighted s = N/(N+T) and s_lc = T/(N+T).
        return np.asarray(
            H_U
            + sum(
                problem.jacobian(theta, X, f, block.s_lc * nu)
                for f, nu in zip(block.f_lc, block.nu_lc, strict=True)
            ),
            dtype=float,
        )
    T, N = block.n_labeled, block.n_unlabeled
    return np.asarray((T * H_L + N * H_U) / (T + N), dtype=float)


def score_stats(
    problem: ZProblem, blocks: list[Block], thetas: list[Array], with_pool: bool = True
) -> ScoreStats:
    """Plug-in statistics for stacked targets at ``thetas`` (one per block).

    One pass over the pool per block (its scores, their sum and Gram). ``with_pool=False`` is for
    λ = 0: it skips the pool scores (``V_U`` is then zero; the variance does not involve them) and
    takes the labeled Jacobian ``H_L`` (the classical labeled-only estimator, see
    :func:`block_jacobian`).
    """
    if (
        len(blocks) == 1
        and type(problem) is MeanProblem
        and blocks[0].n_unlabeled > 1
        and not blocks[0].centre
    ):
        # The mean's pool scores are affine in θ: their moments come from sums kept on the block.
        blk = blocks[0]
        a, b, _, H = _block_stats(problem, blk, thetas[0], with_pool=False, pooled_h=with_pool)
        return _stats(problem, a, b, _mean_pool_moments(blk, thetas[0]), H, blk.n_unlabeled, blocks)
    parts = [
        _block_stats(problem, b, t, with_pool, with_pool)
        for b, t in zip(blocks, thetas, strict=True)
    ]
    if len(parts) == 1:
        a, b, u_, H = parts[0]
    else:
        a = np.hstack([p[0] for p in parts])
        b = np.hstack([p[1] for p in parts])
        us = [p[2] for p in parts]
        u_ = None if any(x is None for x in us) else np.hstack([x for x in us if x is not None])
        H = _block_diag([p[3] for p in parts])
    N = blocks[0].n_unlabeled
    pool = _moments(u_) if u_ is not None and N > 1 else None
    return _stats(problem, a, b, pool, H, N, blocks)


def _stats(
    problem: ZProblem,
    a: Array,
    b: Array,
    pool: tuple[Array, Array] | None,
    H: Array,
    N: int,
    blocks: list[Block],
) -> ScoreStats:
    """ScoreStats from the labeled scores and the pool scores' sum and Gram (``None``: unused)."""
    check_invertible(problem, H, "Jacobian")
    T, D = a.shape
    sa, aa = _moments(a)
    sb, bb = _moments(b)
    C_aa = _cross_cov(T, sa, sa, aa)
    C_bb = _cross_cov(T, sb, sb, bb)
    C_ab = _cross_cov(T, sa, sb, a.T @ b)
    V_U = np.zeros((D, D))
    V_pooled = None
    if pool is not None:
        su, uu = pool
        V_U = _cross_cov(N, su, su, uu)
        if all(_exchangeable(blk) for blk in blocks):
            V_pooled = _cross_cov(T + N, sb + su, sb + su, bb + uu)
    return ScoreStats(C_aa, C_ab, C_bb, V_U, H, T, N, V_pooled)


def _block_diag(mats: list[Array]) -> Array:
    D = sum(m.shape[0] for m in mats)
    out = np.zeros((D, D))
    i = 0
    for m in mats:
        d = m.shape[0]
        out[i : i + d, i : i + d] = m
        i += d
    return out


def covariance(stats: ScoreStats, lam: Array) -> Array:
    """Cov(θ̂) = H⁻¹ [C_aa − C_ab Λ − Λ C_ba + Λ C_bb Λ + (T/N) Λ V_U Λ] H⁻ᵀ / T."""
    L = np.diag(np.broadcast_to(lam, (stats.H.shape[0],)))
    V = stats.C_aa - stats.C_ab @ L - L @ stats.C_ab.T + L @ stats.C_bb @ L
    if stats.N > 0:
        V = V + (stats.T / stats.N) * L @ stats.V_U @ L
    H_inv = stats.H_inv
    cov = H_inv @ V @ H_inv.T / stats.T
    return (cov + cov.T) / 2


LAM_PLUGINS: tuple[str, ...] = ("ppi", "separate")


def _tuning_matrices(stats: ScoreStats, plugin: str) -> tuple[Array, Array]:
    """Numerator and denominator matrices of λ̂ (before the trace or contrast)."""
    H_inv = stats.H_inv
    T, N = stats.T, max(stats.N, 1)
    if plugin == "ppi":
        # ppi_py._calc_lam_glm: cross term with ddof=0; prediction scores of the two samples pooled
        # into one variance when they share a law (then (1 + T/N) V_pooled), else kept separate.
        C_ab = stats.C_ab * (T - 1) / T
        pred = (
            (1 + T / N) * stats.V_pooled
            if stats.V_pooled is not None
            else stats.C_bb + (T / N) * stats.V_U
        )
    elif plugin == "separate":
        C_ab, pred = stats.C_ab, stats.C_bb + (T / N) * stats.V_U
    else:
        raise ValueError(f"lam_plugin must be one of {LAM_PLUGINS}, got {plugin!r}")
    return H_inv @ (C_ab + C_ab.T) @ H_inv.T, 2 * H_inv @ pred @ H_inv.T


def tune_lambda(
    stats: ScoreStats,
    mode: str = "overall",
    coord: int | Sequence[float] | Array | None = None,
    clip: bool = True,
    plugin: str = "ppi",
) -> Array:
    """The plug-in power-tuning λ̂ (spec §2.3), the minimiser of the plug-in variance.

    ``mode="overall"``: one λ minimising tr Cov(θ̂), or Var(θ̂_coord) when ``coord`` is an index, or
    Var(cᵀθ̂) when ``coord`` is a weight vector ``c`` of length D (a contrast such as an effect);
    ``mode="element"``: one λ per coordinate from the diagonals, as ``ppi_py``'s ``lam_optim_mode``;
    a coordinate whose plug-in variance the vector would raise above its λ = 0 value (the
    coordinates interact through H⁻¹) gets λ = 0 instead, until none does.
    ``plugin="ppi"`` (default) is ``ppi_py._calc_lam_glm``'s estimate, to which it reduces exactly
    without adaptivity; ``"separate"`` keeps ``ddof=1`` and the two samples' variances apart.
    With ``clip`` λ̂ is clipped to [0, 1]. Returns a vector of length D (constant for ``"overall"``).
    """
    num_m, den_m = _tuning_matrices(stats, plugin)
    D = stats.H.shape[0]
    if mode == "overall":
        if coord is None:
            num, den = np.trace(num_m), np.trace(den_m)
        else:
            c = contrast_vector(coord, D)
            num, den = c @ num_m @ c, c @ den_m @ c
        lam = np.full(D, num / den if den > 0 else 0.0)
        return np.clip(lam, 0.0, 1.0) if clip else lam
    if mode != "element":
        raise ValueError(f"mode must be 'overall' or 'element', got {mode!r}")
    num_d, den_d = np.diag(num_m), np.diag(den_m)
    lam = np.divide(num_d, den_d, out=np.zeros(D), where=den_d > 0)
    lam = np.clip(lam, 0.0, 1.0) if clip else lam
    return element_fallback(stats, lam)


def element_fallback(stats: ScoreStats, lam: Array) -> Array:
    """Zero λ_k for every coordinate whose plug-in variance λ would raise above its λ = 0 value."""
    lam = lam.copy()
    base = np.diag(covariance(stats, np.zeros_like(lam)))
    while np.any(lam != 0):
        worse = np.diag(covariance(stats, lam)) > base * (1 + 1e-12)
        if not worse.any():
            break
        lam[zero_where(worse, lam)] = 0.0
    return lam


def zero_where(worse: NDArray[np.bool_], lam: Array) -> NDArray[np.bool_]:
    """Which λ_k to zero when ``worse`` coordinates widened: theirs, or all when theirs are already 0
    (they were widened through the others, via H⁻¹). Each step zeroes at least one λ_k."""
    own = worse & (lam != 0)
    return own if own.any() else np.ones_like(worse)


def contrast_vector(coord: int | Sequence[float] | Array, D: int) -> Array:
    """``coord`` as weights on the D coordinates of θ: a 0-based index (a unit vector) or a vector."""
    if isinstance(coord, (int, np.integer)):
        if not 0 <= coord < D:
            raise ValueError(f"coord must index a coordinate of θ in [0, {D}), got {coord}")
        return np.eye(D)[int(coord)]
    c = np.asarray(coord, dtype=float)
    if c.shape != (D,) or not np.all(np.isfinite(c)) or not np.any(c):
        raise ValueError(
            f"coord must be an index or {D} finite weights, not all zero (one per coordinate of θ), "
            f"got {coord!r}"
        )
    return c


def lam_vector(lam: float | NDArray[np.floating], D: int) -> Array:
    """A user's λ (scalar or length-D vector) as a length-D float vector."""
    arr = np.asarray(lam, dtype=float)
    if arr.ndim == 0:
        return np.full(D, float(arr))
    if arr.shape != (D,):
        raise ValueError(
            f"lam must be a scalar or have length {D} (the dimension of θ), got {arr.shape}"
        )
    return arr.copy()
