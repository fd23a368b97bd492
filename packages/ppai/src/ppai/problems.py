"""Z-estimation problems: the estimating function ψ(θ; x, y), its Jacobian and a starting value.

A target θ* solves E[ψ(θ*; X, Y)] = 0. PPAI never looks inside a problem: it evaluates ψ on the
labeled outcomes, on the predictions for the labeled rows and on the predictions for the unlabeled
pool, and combines them (see :mod:`ppai.estimating`). Any object with the :class:`ZProblem` methods
can be estimated; the four built-ins cover the cases of the spec.

Conventions (shared with every method below): ``X`` is ``(n, p)`` or ``None`` for problems without
covariates, ``Y`` is ``(n,)``, ``w`` is ``(n,)`` and a Jacobian is the *mean* ``(1/n) Σ_i w_i ∂ψ_i/∂θ``
(not normalised by ``Σ w``), so that the weighted sums of PPAI add up without rescaling.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]


@runtime_checkable
class ZProblem(Protocol):
    """What PPAI needs from an estimation problem.

    Optional attributes, read with defaults:

    * ``name`` (``str``): used in error messages; defaults to the class name.
    * ``jacobian_uses_y`` (``bool``, default ``True``): whether ∂ψ/∂θ depends on the outcome. When it
      does not (mean, OLS, logistic) the population Jacobian is estimated on labeled *and* unlabeled
      contexts, as PPI++ does; otherwise on labeled outcomes only.
    * ``singular_reason`` (``str``): what usually makes the Jacobian singular, for the error message.
    * ``solve(groups)``: a custom root finder for non-smooth ψ (see :class:`QuantileProblem`).
    """

    def dim(self, X: Array | None) -> int:
        """Dimension d of θ for covariates ``X``."""
        ...

    def psi(self, theta: Array, X: Array | None, Y: Array) -> Array:
        """ψ(θ; x_i, y_i) for every row, shape ``(n, d)``."""
        ...

    def jacobian(self, theta: Array, X: Array | None, Y: Array, w: Array) -> Array:
        """``(1/n) Σ_i w_i ∂ψ(θ; x_i, y_i)/∂θ``, shape ``(d, d)``."""
        ...

    def init(self, X: Array | None, Y: Array, w: Array) -> Array:
        """A starting value for Newton's method, shape ``(d,)``."""
        ...


def _expit(z: Array) -> Array:
    # exp of a large positive argument overflows; the two-branch form never does.
    out = np.empty_like(z)
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    ez = np.exp(z[~pos])
    out[~pos] = ez / (1.0 + ez)
    return out


def _require_x(X: Array | None, name: str) -> Array:
    if X is None:
        raise ValueError(f"the {name} problem needs covariates X, got None")
    return X


class MeanProblem:
    """The mean: ψ(θ; y) = y − θ, d = 1 (``X`` is ignored)."""

    name = "mean"
    jacobian_uses_y = False
    singular_reason = "the target has no weight on any labeled or unlabeled row"

    def dim(self, X: Array | None) -> int:
        return 1

    def psi(self, theta: Array, X: Array | None, Y: Array) -> Array:
        return (Y - theta[0])[:, None]

    def jacobian(self, theta: Array, X: Array | None, Y: Array, w: Array) -> Array:
        return np.array([[-float(np.mean(w))]])

    def init(self, X: Array | None, Y: Array, w: Array) -> Array:
        total = float(np.sum(w))
        return np.array([float(np.sum(w * Y)) / total if total > 0 else 0.0])

    def solve(self, groups: list[tuple[Array | None, Array, Array, Array]]) -> Array:
        """Closed form (spec §2.2): θ = Σ_g λ_g mean(c Y) / Σ_g λ_g mean(c).

        For IPW this is ``[λ f̄_U + (1/T) Σ ρ_t (Y_t − λ f_t)] / [λ + (1 − λ) ρ̄]``.
        """
        num = sum(lam[0] * float(c @ Y) / Y.shape[0] for _, Y, c, lam in groups)
        den = sum(lam[0] * float(c.sum()) / Y.shape[0] for _, Y, c, lam in groups)
        check_invertible(self, np.array([[den]]), "Jacobian")
        return np.array([num / den])


class OLSProblem:
    """Least squares: ψ(θ; x, y) = x (y − xᵀθ), d = p (add a column of ones for an intercept).

    ``form="ppi"`` (default): for a scalar λ the point estimate is ``ppi_py``'s sum of two weighted
    regressions, the rectifier ``G_L⁻¹ (1/T) Σ w_t X_t (Y_t − λ f_t)`` and the imputed
    ``λ G_P⁻¹ (1/N) Σ_j Σ_a s ν X̃_j f̃_j``, each with its own sample's Gram matrix ``G``; it is
    consistent for the same θ* and equals ``ppi_py.ppi_ols_pointestimate`` without adaptivity.
    ``form="joint"``: the root of the joint estimating equation Ψ_λ (spec §2.2), one Gram matrix
    ``H(λ)``; a per-coordinate λ always uses this form.
    """

    name = "ols"
    jacobian_uses_y = False
    singular_reason = "the covariates are collinear or the target arm has fewer rows than columns"

    def __init__(self, form: str = "ppi") -> None:
        if form not in ("ppi", "joint"):
            raise ValueError(f"form must be 'ppi' or 'joint', got {form!r}")
        self.form = form

    def dim(self, X: Array | None) -> int:
        return _require_x(X, self.name).shape[1]

    def psi(self, theta: Array, X: Array | None, Y: Array) -> Array:
        X = _require_x(X, self.name)
        return X * (Y - X @ theta)[:, None]

    def jacobian(self, theta: Array, X: Array | None, Y: Array, w: Array) -> Array:
        X = _require_x(X, self.name)
        return -(X.T * w) @ X / X.shape[0]

    def init(self, X: Array | None, Y: Array, w: Array) -> Array:
        return np.zeros(self.dim(X))

    def _normal_equations(self, groups: list[tuple[Array | None, Array, Array, Array]]):
        """Per group: its Gram ``(1/n) Xᵀ C X`` and moment ``(1/n) Xᵀ (c Y)``."""
        out = []
        for X, Y, c, lam in groups:
            X = _require_x(X, self.name)
            out.append(((X.T * c) @ X / Y.shape[0], X.T @ (c * Y) / Y.shape[0], lam))
        return out

    def solve(self, groups: list[tuple[Array | None, Array, Array, Array]]) -> Array:
        """Closed forms. ``groups`` come in :func:`ppai.estimating.groups`' order: labeled outcomes,
        labeled predictions (the same contexts and weights), then the pool groups.

        Joint (spec §2.2): Σ_g Λ_g G_g θ = Σ_g Λ_g m_g, i.e. for IPW and scalar λ
        ``H(λ) θ = λ (1/N) Σ X̃ f̃ + (1/T) Σ ρ_t X_t (Y_t − λ f_t)``,
        ``H(λ) = λ (1/N) Σ X̃ X̃ᵀ + (1 − λ) (1/T) Σ ρ_t X_t X_tᵀ``.
        """
        eqs = self._normal_equations(groups)
        scalar = all(np.ptp(lam) == 0 for _, _, lam in eqs)
        if self.form == "joint" or len(eqs) < 3 or not scalar:
            A = sum(lam[:, None] * G for G, _, lam in eqs)
            b = sum(lam * m for _, m, lam in eqs)
            check_invertible(self, A, "Jacobian")
            return np.asarray(np.linalg.solve(A, b), dtype=float)
        (G_L, m_Y, _), (_, m_f, lam_f), pool = eqs[0], eqs[1], eqs[2:]
        G_P = sum(G for G, _, _ in pool)
        m_P = sum(m for _, m, _ in pool)
        check_invertible(self, G_L, "labeled Gram matrix")
        check_invertible(self, G_P, "unlabeled Gram matrix")
        lam = float(pool[0][2][0])
        rectifier = np.linalg.solve(G_L, m_Y + float(lam_f[0]) * m_f)
        return np.asarray(rectifier + lam * np.linalg.solve(G_P, m_P), dtype=float)


class LogisticProblem:
    """Logistic regression: ψ(θ; x, y) = x (y − σ(xᵀθ)), y ∈ [0, 1] (predictions may be soft)."""

    name = "logistic"
    jacobian_uses_y = False
    singular_reason = (
        "the covariates are collinear, or the fitted probabilities are all 0 or 1 (separation)"
    )
    nonconvergence_reason = (
        "the outcomes are (quasi-)completely separated by the covariates, so the coefficients "
        "diverge and the logistic estimate does not exist; drop or merge the separating covariate"
    )

    def dim(self, X: Array | None) -> int:
        return _require_x(X, self.name).shape[1]

    def psi(self, theta: Array, X: Array | None, Y: Array) -> Array:
        X = _require_x(X, self.name)
        return X * (Y - _expit(X @ theta))[:, None]

    def score_sum(self, theta: Array, X: Array | None, Y: Array, c: Array) -> Array:
        """``c @ psi(theta, X, Y)`` without the (n, d) score array (Newton's hot path)."""
        X = _require_x(X, self.name)
        return np.asarray((c * (Y - _expit(X @ theta))) @ X, dtype=float)

    def jacobian(self, theta: Array, X: Array | None, Y: Array, w: Array) -> Array:
        X = _require_x(X, self.name)
        mu = _expit(X @ theta)
        return -(X.T * (w * mu * (1.0 - mu))) @ X / X.shape[0]

    def init(self, X: Array | None, Y: Array, w: Array) -> Array:
        return np.zeros(self.dim(X))


class QuantileProblem:
    """The q-quantile: ψ(θ; y) = 1{y ≤ θ} − q, d = 1.

    ψ is a step function, so Newton's method does not apply: :meth:`solve` evaluates the estimating
    equation exactly at every observed value (it only changes there) and returns the value where it is
    closest to zero, as ``ppi_py.ppi_quantile_pointestimate(exact_grid=True)`` does. The Jacobian is
    the density of Y at θ, estimated by a weighted Gaussian kernel with Silverman's bandwidth.
    """

    name = "quantile"
    jacobian_uses_y = True
    singular_reason = "the outcome density at the estimate is zero (a gap in the data)"

    def __init__(self, q: float = 0.5) -> None:
        if not 0.0 < q < 1.0:
            raise ValueError(f"q must lie in (0, 1), got {q!r}")
        self.q = q

    def dim(self, X: Array | None) -> int:
        return 1

    def psi(self, theta: Array, X: Array | None, Y: Array) -> Array:
        return ((theta[0] >= Y).astype(float) - self.q)[:, None]

    def jacobian(self, theta: Array, X: Array | None, Y: Array, w: Array) -> Array:
        total = float(np.sum(np.abs(w)))
        if total == 0.0:
            return np.zeros((1, 1))
        p = np.abs(w) / total
        mean = float(np.sum(p * Y))
        sd = float(np.sqrt(np.sum(p * (Y - mean) ** 2)))
        used = Y[w != 0]
        if np.ptp(used) == 0:
            raise ValueError(
                f"the quantile problem needs outcomes that vary: every weighted Y equals "
                f"{float(used[0])!r}, so the density at the quantile (the Jacobian) is undefined"
            )
        n_eff = total**2 / float(np.sum(w**2))
        h = 1.06 * max(sd, 1e-12) * n_eff ** (-0.2)
        z = (theta[0] - Y) / h
        dens = np.sum(w * np.exp(-0.5 * z**2)) / (h * np.sqrt(2 * np.pi))
        return np.array([[dens / Y.shape[0]]])

    def init(self, X: Array | None, Y: Array, w: Array) -> Array:
        return np.array([float(np.quantile(Y, self.q))])

    def solve(self, groups: list[tuple[Array | None, Array, Array, Array]]) -> Array:
        """The root of Ψ(θ) = Σ_g λ_g (1/n_g) Σ_i c_i ψ(θ; y_i), searched over the observed values.

        ``groups`` holds ``(X, Y, c, lam)`` with ``lam`` of length 1, as :mod:`ppai.estimating` builds.
        """
        values = np.concatenate([Y for _, Y, _, _ in groups])
        weights = np.concatenate([c * (lam[0] / Y.shape[0]) for _, Y, c, lam in groups])
        order = np.argsort(values, kind="stable")
        v, c = values[order], weights[order]
        # Ψ is constant between observed values; at each distinct value it is the cumulative weight
        # up to it minus q times the total weight.
        last = np.r_[v[1:] != v[:-1], True]
        psi = np.cumsum(c)[last] - self.q * c.sum()
        return np.array([v[last][int(np.argmin(np.abs(psi)))]])


def check_invertible(problem: object, J: Array, what: str) -> None:
    """Raise a ValueError naming the problem and the usual cause when ``J`` is (near) singular.

    The test is scale-invariant: ``J`` is first equilibrated by its diagonal, ``D^-½ J D^-½``, so
    a full-rank design with columns of very different scales (say 1e3 and 1e-3) is not taken for a
    collinear one.
    """
    d = np.sqrt(np.abs(np.diag(J)))
    if np.all(d > 0) and np.all(np.isfinite(d)):
        J = J / d[:, None] / d[None, :]
    sv = np.linalg.svd(J, compute_uv=False)
    if not np.all(np.isfinite(sv)) or sv[-1] <= 1e-12 * max(sv[0], 1e-300):
        reason = getattr(problem, "singular_reason", "the estimating equation is degenerate")
        raise ValueError(
            f"the {what} of the {problem_name(problem)} estimating equation is singular "
            f"(smallest/largest singular value {sv[-1]:.3g}/{sv[0]:.3g}): likely {reason}"
        )


def resolve_problem(problem: str | ZProblem, q: float = 0.5) -> ZProblem:
    """A problem object from its name (``"mean"``, ``"ols"``, ``"logistic"``, ``"quantile"``)."""
    if isinstance(problem, str):
        builtins: dict[str, type[ZProblem]] = {
            "mean": MeanProblem,
            "ols": OLSProblem,
            "logistic": LogisticProblem,
        }
        if problem == "quantile":
            return QuantileProblem(q)
        if problem not in builtins:
            raise ValueError(
                f"problem must be one of 'mean', 'ols', 'logistic', 'quantile' or a ZProblem, "
                f"got {problem!r}"
            )
        return builtins[problem]()
    missing = [
        m for m in ("dim", "psi", "jacobian", "init") if not callable(getattr(problem, m, None))
    ]
    if missing:
        raise TypeError(
            f"problem {problem!r} is not a ZProblem: it lacks the method(s) {', '.join(missing)}"
        )
    return problem


def problem_name(problem: object) -> str:
    """A problem's ``name`` attribute, or its class name, for messages."""
    return str(getattr(problem, "name", type(problem).__name__))
