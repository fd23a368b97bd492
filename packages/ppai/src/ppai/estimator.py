"""The PPAI estimator object (scikit-learn style) and the fitting pipeline it wraps.

Pipeline (spec §2.3): θ̂₀ = labeled-only IPW solution → λ̂ at θ̂₀ → θ̂ = root of Ψ_λ̂ → Cov(θ̂) at θ̂.
"""

from __future__ import annotations

import dataclasses
import inspect
import warnings
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtr, ndtri

from ppai.estimating import (
    LAM_PLUGINS,
    Block,
    contrast_vector,
    covariance,
    lam_vector,
    score_stats,
    solve,
    tune_lambda,
    zero_where,
)
from ppai.inputs import (
    PROPENSITY_FLOOR,
    check_alpha,
    check_data,
    check_floor,
    check_logistic,
)
from ppai.problems import Array, ZProblem, problem_name, resolve_problem
from ppai.weighting import (
    WEIGHTINGS,
    TargetPolicy,
    Weighting,
    build_blocks,
    with_sample_weights,
)

Alternative = Literal["two-sided", "larger", "smaller"]


@dataclasses.dataclass(frozen=True)
class ZFit:
    """The result of :func:`fit_blocks`: stacked θ̂ (length D), its covariance and the λ used.

    ``theta_pilot``/``cov_pilot``: the labeled-only (λ = 0) estimate and its covariance, with the
    labeled Jacobian, as :func:`ppai.ipw_ci` and ``ppi_py`` at λ = 0. ``lam_tuned``: the plug-in λ̂ before the guarantee's
    fallback (``None`` for a user-given λ).
    """

    theta: Array
    cov: Array
    lam: Array
    theta_pilot: Array
    cov_pilot: Array | None = None
    lam_tuned: Array | None = None


def _solve_all(
    problem: ZProblem, blocks: list[Block], lam: Array, start: list[Array]
) -> list[Array]:
    cuts = np.cumsum([0, *(s.shape[0] for s in start)])
    return [
        solve(problem, b, lam[cuts[i] : cuts[i + 1]], theta0=start[i]) for i, b in enumerate(blocks)
    ]


def _widened(cov: Array, base: Array, mode: str, coord: Any) -> NDArray[np.bool_]:
    """Which coordinates (element mode) or whether the objective (overall) is above the λ = 0 one."""
    tol = 1 + 1e-12
    if mode == "element":
        return np.asarray(np.diag(cov) > np.diag(base) * tol)
    D = cov.shape[0]
    if coord is None:
        # No coordinate's interval may widen (the trace alone would let one widen, see the README).
        return np.full(D, bool(np.any(np.diag(cov) > np.diag(base) * tol)))
    c = contrast_vector(coord, D)
    return np.full(D, c @ cov @ c > (c @ base @ c) * tol)


def fit_blocks(
    problem: ZProblem,
    blocks: list[Block],
    lam: float | Array | None = None,
    *,
    lam_mode: str = "overall",
    coord: int | Sequence[float] | None = None,
    clip_lam: bool = True,
    lam_plugin: str = "ppi",
    fallback: bool = True,
) -> ZFit:
    """Fit stacked targets: ``lam=None`` tunes λ (scalar or per coordinate), else uses it as given.

    Tuning (spec §2.3): θ̂₀ = labeled-only solution; with ``lam_plugin="ppi"`` (as ``ppi_py``'s
    intervals) λ̂₁ from the statistics at the λ = 1 solution, then λ̂ from those at the λ̂₁
    solution; with ``"separate"`` λ̂ from the statistics at θ̂₀. θ̂ = root of Ψ_λ̂; Cov(θ̂) at θ̂. The guarantee: when the tuned variance (its trace, the ``coord`` target, or each
    coordinate in element mode) comes out above the λ = 0 one — possible on a finite sample, since
    λ̂ is estimated at another θ — the fit falls back to λ = 0 there, so the tuned standard error is
    never above the labeled-only one. ``fallback=False`` keeps λ̂ as tuned (``ppi_py``'s
    behaviour, to which the fit then reduces exactly without adaptivity).
    """
    dims = [problem.dim(b.X) for b in blocks]
    D = sum(dims)
    zero = np.zeros(D)
    pilot = [solve(problem, b, zero[:d]) for b, d in zip(blocks, dims, strict=True)]
    lam_v = None if lam is None else lam_vector(lam, D)
    # The pool is the unlabeled contexts, plus the labeled ones with include_labeled_contexts.
    pool = [b.n_unlabeled + (b.n_labeled if b.f_lc else 0) for b in blocks]
    if lam_v is None and min(pool) < 2:
        # Spec §8: N = 0 is allowed. Without a pool nothing can be tuned: the labeled-only fit.
        warnings.warn(
            "fewer than 2 unlabeled contexts and include_labeled_contexts=False: the predictions "
            "cannot enter, returning the labeled-only estimator (lambda = 0)",
            UserWarning,
            stacklevel=3,
        )
        lam_v = zero.copy()
    if lam_v is not None and np.any(lam_v != 0) and min(pool) < 2:
        raise ValueError(
            "PPAI needs at least 2 unlabeled contexts (or include_labeled_contexts=True); pass "
            "lam=0 for the labeled-only estimator"
        )
    if lam_v is not None:
        if np.all(lam_v == 0):
            stats0 = score_stats(problem, blocks, pilot, with_pool=False)
            cov0 = covariance(stats0, lam_v)
            return ZFit(np.concatenate(pilot), cov0, lam_v, np.concatenate(pilot), cov0)
        thetas = _solve_all(problem, blocks, lam_v, pilot)
        cov = covariance(score_stats(problem, blocks, thetas), lam_v)
        return ZFit(np.concatenate(thetas), cov, lam_v, np.concatenate(pilot))
    if lam_plugin not in LAM_PLUGINS:
        raise ValueError(f"lam_plugin must be one of {LAM_PLUGINS}, got {lam_plugin!r}")
    at = pilot
    if lam_plugin == "ppi":
        # ppi_py's interval: λ̂₁ at the λ = 1 estimate, then λ̂ at the λ̂₁ estimate.
        at = _solve_all(problem, blocks, np.ones(D), pilot)
        lam_1 = tune_lambda(score_stats(problem, blocks, at), lam_mode, coord, clip_lam, "ppi")
        if not np.all(lam_1 == 1):
            at = _solve_all(problem, blocks, lam_1, pilot)
    lam_hat = tune_lambda(score_stats(problem, blocks, at), lam_mode, coord, clip_lam, lam_plugin)
    cov0 = covariance(score_stats(problem, blocks, pilot, with_pool=False), zero)
    lam_v = lam_hat.copy()
    while np.any(lam_v != 0):
        thetas = _solve_all(problem, blocks, lam_v, pilot)
        cov = covariance(score_stats(problem, blocks, thetas), lam_v)
        worse = _widened(cov, cov0, lam_mode, coord)
        if not fallback or not worse.any():
            return ZFit(np.concatenate(thetas), cov, lam_v, np.concatenate(pilot), cov0, lam_hat)
        lam_v[zero_where(worse, lam_v)] = 0.0
    return ZFit(np.concatenate(pilot), cov0, lam_v, np.concatenate(pilot), cov0, lam_hat)


def z_interval(theta: Array, se: Array, alpha: float, alternative: str = "two-sided") -> Array:
    """Wald intervals ``(D, 2)``; one-sided alternatives give a half-line (ppi_py's convention)."""
    if alternative == "two-sided":
        z = ndtri(1 - alpha / 2)
        return np.stack([theta - z * se, theta + z * se], axis=-1)
    z = ndtri(1 - alpha)
    if alternative == "larger":
        return np.stack([theta - z * se, np.full_like(theta, np.inf)], axis=-1)
    if alternative == "smaller":
        return np.stack([np.full_like(theta, -np.inf), theta + z * se], axis=-1)
    raise ValueError(f"alternative must be 'two-sided', 'larger' or 'smaller', got {alternative!r}")


def z_pvalue(theta: Array, se: Array, null: float | Array, alternative: str = "two-sided") -> Array:
    """Wald p-values for H0: θ = null against the alternative."""
    z = (theta - null) / se
    if alternative == "two-sided":
        return 2 * ndtr(-np.abs(z))
    if alternative == "larger":
        return ndtr(-z)
    if alternative == "smaller":
        return ndtr(z)
    raise ValueError(f"alternative must be 'two-sided', 'larger' or 'smaller', got {alternative!r}")


class PPAI:
    """Prediction-powered inference on adaptively collected data ([R] reconstruction, see the README).

    Parameters
    ----------
    problem : ``"mean"``, ``"ols"``, ``"logistic"``, ``"quantile"`` or a :class:`ppai.ZProblem`.
    target_arm : an arm index, or a sequence of arms estimated jointly (for contrasts).
    target_policy : instead of arms, a policy to evaluate off-policy: a callable mapping contexts
        ``(n, p)`` to ``(n, K)`` probabilities, or a fixed length-K probability vector.
    lam : ``"auto"`` (plug-in power tuning), a float, or a per-coordinate vector. 0 gives the
        labeled-only IPW estimator, 1 plain prediction-powered inference.
    clip_lam : clip the tuned λ to [0, 1]; a user λ outside [0, 1] is then an error.
    coord : tune λ for the variance of this coordinate only (0-based), or of ``coord · θ`` when it
        is a weight vector (say ``[1, -1]`` with ``target_arm=[1, 0]``: the effect).
    lam_mode : ``"overall"`` (one λ) or ``"element"`` (one λ per coordinate).
    lam_plugin : the plug-in estimate of λ̂: ``"ppi"`` (``ppi_py``'s, to which it reduces exactly
        without adaptivity: statistics at the λ = 1 estimate, the prediction scores of both samples
        pooled when they share a law) or ``"separate"`` (at the labeled-only pilot, the two
        samples' variances kept apart).
    fallback : with a tuned λ, fall back to λ = 0 (per coordinate in element mode) wherever the
        tuned standard error would exceed the labeled-only one (the guarantee; default). ``False``
        keeps λ̂ as tuned, as ``ppi_py`` does (exact reduction to it without adaptivity).
    weighting : ``"ipw"``, ``"sqrt_stabilized"`` or ``"none"`` (ignore adaptivity); see
        :mod:`ppai.weighting`.
    stabilizing_policy : π_s for ``"sqrt_stabilized"``; uniform by default.
    context_free_policy : say that the logging policy ignored the context (a multi-armed bandit);
        ``"sqrt_stabilized"`` is only valid then, and warns unless this is ``True``.
    include_labeled_contexts : add the labeled contexts, with their predictions for every target arm,
        to the unlabeled pool (AIPW-style; needs ``pred_labeled`` as a ``(T, K)`` matrix).
    alpha : default error level of :meth:`conf_int`, in (0, 1).
    q : quantile level for ``problem="quantile"``.
    propensity_floor : warn when a logged propensity is below it.
    estimated_propensities : say that ``propensity`` was estimated (say, by a classifier on logs
        without recorded probabilities) rather than logged; ``fit`` then warns, since the variance
        assumes known propensities.
    n_arms : number of arms K when the arrays do not show it.

    Attributes
    ----------
    theta_ : (D,) estimates, stacked over targets. cov_ : (D, D) covariance. se_ : (D,) standard
    errors. lam_ : float (one λ) or (D,) array. theta_labeled_only_ : (D,) the IPW pilot (λ = 0).
    n_labeled_, n_unlabeled_, n_arms_ : sample sizes and K. problem_ : the resolved problem.
    blocks_ : the :class:`ppai.Block` of each target, the arrays the pure functions
    (:func:`ppai.score_stats`, :func:`ppai.fit_blocks`) take.
    """

    def __init__(
        self,
        problem: str | ZProblem = "mean",
        *,
        target_arm: int | Sequence[int] | None = None,
        target_policy: TargetPolicy | None = None,
        lam: float | Sequence[float] | Literal["auto"] | None = "auto",
        clip_lam: bool = True,
        coord: int | Sequence[float] | None = None,
        lam_mode: Literal["overall", "element"] = "overall",
        lam_plugin: Literal["ppi", "separate"] = "ppi",
        fallback: bool = True,
        weighting: Weighting = "ipw",
        stabilizing_policy: Sequence[float] | None = None,
        context_free_policy: bool = False,
        include_labeled_contexts: bool = False,
        alpha: float = 0.05,
        q: float = 0.5,
        propensity_floor: float = PROPENSITY_FLOOR,
        estimated_propensities: bool = False,
        n_arms: int | None = None,
    ) -> None:
        self.problem = problem
        self.target_arm = target_arm
        self.target_policy = target_policy
        self.lam = lam
        self.clip_lam = clip_lam
        self.coord = coord
        self.lam_mode = lam_mode
        self.lam_plugin = lam_plugin
        self.fallback = fallback
        self.weighting = weighting
        self.stabilizing_policy = stabilizing_policy
        self.context_free_policy = context_free_policy
        self.include_labeled_contexts = include_labeled_contexts
        self.alpha = alpha
        self.q = q
        self.propensity_floor = propensity_floor
        self.estimated_propensities = estimated_propensities
        self.n_arms = n_arms

    def _check_params(self) -> tuple[ZProblem, tuple[int, ...], Array | None]:
        problem = resolve_problem(self.problem, self.q)
        check_alpha(self.alpha)
        check_floor(self.propensity_floor)
        if self.weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {self.weighting!r}")
        if (self.target_arm is None) == (self.target_policy is None):
            raise ValueError("give exactly one of target_arm and target_policy")
        arms: tuple[int, ...] = ()
        if self.target_arm is not None:
            raw = np.atleast_1d(np.asarray(self.target_arm))
            if raw.ndim != 1 or raw.size == 0 or not np.issubdtype(raw.dtype, np.integer):
                raise TypeError(
                    f"target_arm must be an int or a sequence of ints, got {self.target_arm!r}"
                )
            arms = tuple(int(a) for a in raw)
            if len(set(arms)) != len(arms):
                raise ValueError(f"target_arm has repeated arms: {arms}")
        if isinstance(self.lam, str) or self.lam is None:
            if self.lam not in ("auto", None):
                raise ValueError(f"lam must be 'auto', a float or a vector, got {self.lam!r}")
            return problem, arms, None
        lam = np.asarray(self.lam, dtype=float)
        if not np.all(np.isfinite(lam)):
            raise ValueError(f"lam must be finite, got {self.lam!r}")
        if self.clip_lam and (np.any(lam < 0) or np.any(lam > 1)):
            raise ValueError(
                f"lam={self.lam!r} lies outside [0, 1] while clip_lam=True; pass clip_lam=False to "
                "use it as given"
            )
        return problem, arms, lam

    def fit(
        self,
        X: Any,
        A: Any,
        Y: Any,
        propensity: Any,
        pred_labeled: Any,
        X_unlabeled: Any,
        pred_unlabeled: Any,
        *,
        w: Any = None,
        w_unlabeled: Any = None,
    ) -> PPAI:
        """Fit on T labeled rounds and an unlabeled pool of N contexts.

        X : (T, p) contexts/covariates of the rounds, or None (mean, quantile without contexts).
        A : (T,) played arms in {0..K-1}. Y : (T,) outcomes of the played arms.
        propensity : (T,) logged propensity of the played arm, or the (T, K) matrix.
        pred_labeled : (T,) predictions for the played arm, or (T, K) for every arm.
        X_unlabeled : (N, p) contexts of the pool, or None.
        pred_unlabeled : (N, K) predictions for every arm on the pool, or (N,) for a single target arm.
        w, w_unlabeled : optional sample weights of the rounds (T,) and the pool (N,), as ``ppi_py``'s
            (each scaled to sum to its sample size); they multiply the IPW weights and ν.
        """
        problem, arms, lam = self._check_params()
        data = check_data(
            X,
            A,
            Y,
            propensity,
            pred_labeled,
            X_unlabeled,
            pred_unlabeled,
            target_arms=arms,
            n_arms=self.n_arms,
            floor=self.propensity_floor,
        )
        if self.weighting == "sqrt_stabilized" and not self.context_free_policy:
            warnings.warn(
                "weighting='sqrt_stabilized' is biased when the logging policy uses the context "
                "(measured coverage 0.55 and 0.00 of 95% intervals under contextual epsilon-greedy); "
                "use weighting='ipw', or pass context_free_policy=True if the policy ignored it",
                UserWarning,
                stacklevel=2,
            )
        if self.estimated_propensities and self.weighting != "none":
            warnings.warn(
                "estimated_propensities=True: the intervals assume the propensities are the known "
                "probabilities the policy used; with estimated ones their error is not in the "
                "variance, so coverage is not guaranteed",
                UserWarning,
                stacklevel=2,
            )
        if data.N == 0 and self.include_labeled_contexts and (lam is None or np.any(lam != 0)):
            warnings.warn(
                "the unlabeled pool is empty: the predictions enter through the labeled contexts "
                "only (AIPW on the T rounds)",
                UserWarning,
                stacklevel=2,
            )
        if problem_name(problem) == "logistic":
            check_logistic(data)
        blocks = build_blocks(
            data,
            target_arms=arms,
            target_policy=self.target_policy,
            weighting=self.weighting,
            stabilizing_policy=self.stabilizing_policy,
            include_labeled_contexts=self.include_labeled_contexts,
        )
        blocks = with_sample_weights(
            blocks, data, w, w_unlabeled, weighting=self.weighting, target_arms=arms
        )
        fit = fit_blocks(
            problem,
            blocks,
            lam,
            lam_mode=self.lam_mode,
            coord=self.coord,
            clip_lam=self.clip_lam,
            lam_plugin=self.lam_plugin,
            fallback=self.fallback,
        )
        self.problem_ = problem
        self.blocks_ = blocks
        self.theta_ = fit.theta
        self.cov_ = fit.cov
        self.se_ = np.sqrt(np.diag(fit.cov))
        self.lam_ = (
            float(fit.lam[0]) if self.lam_mode == "overall" and np.ptp(fit.lam) == 0 else fit.lam
        )
        self.theta_labeled_only_ = fit.theta_pilot
        self.n_labeled_ = data.T
        self.n_unlabeled_ = data.N
        self.n_arms_ = data.K
        return self

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [n for n in sig.parameters if n != "self"]  # signature order: problem first

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's parameters (scikit-learn's estimator protocol; ``clone`` works)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> PPAI:
        """Set constructor parameters by name (scikit-learn's protocol); returns ``self``."""
        valid = set(self._param_names())
        for name, value in params.items():
            if name not in valid:
                raise ValueError(
                    f"invalid parameter {name!r} for PPAI; valid parameters: {sorted(valid)}"
                )
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        defaults = {
            n: p.default for n, p in inspect.signature(type(self).__init__).parameters.items()
        }
        shown = [
            repr(v) if n == "problem" else f"{n}={v!r}"  # problem is positional, as in __init__
            for n, v in self.get_params().items()
            if not (isinstance(v, (str, int, float, bool, type(None))) and v == defaults.get(n))
        ]
        return f"PPAI({', '.join(shown)})"

    @property
    def params(self) -> Array:
        """statsmodels' name for ``theta_``."""
        self._fitted()
        return self.theta_

    @property
    def bse(self) -> Array:
        """statsmodels' name for ``se_``."""
        self._fitted()
        return self.se_

    @property
    def pvalues(self) -> Array:
        """Two-sided Wald p-values for H0: θ_j = 0 (statsmodels' ``pvalues``)."""
        return self.pvalue(0.0)

    def summary(self, alpha: float | None = None) -> str:
        """A statsmodels-style coefficient table (estimate, SE, z, p-value, interval) as text."""
        self._fitted()
        level = check_alpha(self.alpha if alpha is None else alpha)
        ci = self.conf_int(level)
        lam = np.atleast_1d(self.lam_)
        head = (
            f"PPAI ({problem_name(self.problem_)}): T = {self.n_labeled_}, N = {self.n_unlabeled_}, "
            f"K = {self.n_arms_}, lambda = {', '.join(f'{v:.4g}' for v in lam)}"
        )
        lo, hi = f"[{level / 2:.3g}", f"{1 - level / 2:.3g}]"
        rows = [f"{'':>6} {'coef':>11} {'std err':>11} {'z':>8} {'P>|z|':>9} {lo:>11} {hi:>11}"]
        z = self.theta_ / self.se_
        for j in range(self.theta_.shape[0]):
            rows.append(
                f"{'x' + str(j):>6} {self.theta_[j]:>11.4g} {self.se_[j]:>11.4g} {z[j]:>8.3f} "
                f"{self.pvalues[j]:>9.3g} {ci[j, 0]:>11.4g} {ci[j, 1]:>11.4g}"
            )
        rule = "=" * len(rows[0])
        return "\n".join([head, rule, *rows, rule])

    def _fitted(self) -> None:
        if not hasattr(self, "theta_"):
            raise RuntimeError("this PPAI instance is not fitted yet: call fit(...) first")

    def conf_int(self, alpha: float | None = None, alternative: Alternative = "two-sided") -> Array:
        """``(D, 2)`` Wald confidence intervals at level ``1 − alpha``."""
        self._fitted()
        return z_interval(
            self.theta_, self.se_, check_alpha(self.alpha if alpha is None else alpha), alternative
        )

    def pvalue(self, null: float | Array = 0.0, alternative: Alternative = "two-sided") -> Array:
        """``(D,)`` Wald p-values for H0: θ_j = null_j."""
        self._fitted()
        return z_pvalue(self.theta_, self.se_, null, alternative)

    def contrast(
        self, weights: Sequence[float] | Array, alpha: float | None = None
    ) -> dict[str, float]:
        """Estimate, standard error, interval and p-value (H0: 0) of ``weights · θ``.

        With ``target_arm=[1, 0]``, ``contrast([1, -1])`` is the effect of arm 1 over arm 0.
        """
        self._fitted()
        c = np.asarray(weights, dtype=float)
        if c.shape != self.theta_.shape:
            raise ValueError(
                f"weights must have shape {self.theta_.shape} (one per coordinate), got {c.shape}"
            )
        est = float(c @ self.theta_)
        se = float(np.sqrt(c @ self.cov_ @ c))
        lo, hi = z_interval(
            np.array([est]), np.array([se]), check_alpha(self.alpha if alpha is None else alpha)
        )[0]
        p = float(z_pvalue(np.array([est]), np.array([se]), 0.0)[0])
        return {"estimate": est, "se": se, "lower": float(lo), "upper": float(hi), "pvalue": p}
