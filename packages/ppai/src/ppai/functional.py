"""A functional API in ``ppi_py``'s style: ``ppai_<problem>_{pointestimate,ci,pval}``.

As in ``ppi_py``, ``lam=None`` tunes λ; ``lam=0`` is the labeled-only IPW estimator, ``lam=1`` plain
PPI with an IPW rectifier. Return types are ``ppi_py``'s: intervals ``(lower, upper)`` arrays
(length 1 for one mean), mean estimates and p-values length-1 arrays, a quantile estimate a float
and its interval a length-2 array. The default ``alpha`` is ``ppi_py``'s 0.1 (90 % intervals); ``lam_optim_mode`` is
``ppi_py``'s name for the estimator's ``lam_mode``.
The baselines are here too: :func:`ipw_ci` (labeled-only) and :func:`ppi_ignoring_adaptivity_ci`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from ppai.estimator import PPAI, Alternative
from ppai.inversion import quantile_inversion_interval
from ppai.problems import Array, ZProblem
from ppai.weighting import TargetPolicy

Arm = int | Sequence[int]
Lam = float | Sequence[float] | None


def _fit(
    problem: str | ZProblem,
    X: ArrayLike | None,
    Y: ArrayLike,
    A: ArrayLike,
    propensity: ArrayLike,
    pred_labeled: ArrayLike,
    X_unlabeled: ArrayLike | None,
    pred_unlabeled: ArrayLike,
    arm: Arm,
    lam: Lam,
    **kw: Any,
) -> PPAI:
    if "lam_optim_mode" in kw:  # ppi_py's name
        kw["lam_mode"] = kw.pop("lam_optim_mode")
    weights = {k: kw.pop(k, None) for k in ("w", "w_unlabeled")}
    return PPAI(problem, target_arm=arm, lam="auto" if lam is None else lam, **kw).fit(
        X, A, Y, propensity, pred_labeled, X_unlabeled, pred_unlabeled, **weights
    )


def _scalar(values: Array) -> Any:
    return float(values[0]) if values.shape == (1,) else values


def _ci(est: PPAI, alpha: float, alternative: Alternative) -> tuple[Array, Array]:
    """``(lower, upper)`` arrays of length D, as ``ppi_py`` returns (length 1 for one mean)."""
    ci = est.conf_int(alpha, alternative)
    return ci[:, 0], ci[:, 1]


def ppai_mean_pointestimate(
    Y: ArrayLike,
    A: ArrayLike,
    propensity: ArrayLike,
    pred_labeled: ArrayLike,
    pred_unlabeled: ArrayLike,
    *,
    arm: Arm,
    lam: Lam = None,
    **kw: Any,
) -> Array:
    """PPAI estimate of the mean outcome of ``arm`` (``arm`` may also be a list: a vector of means);
    a length-1 array for one arm, as ``ppi_py.ppi_mean_pointestimate``."""
    return _fit(
        "mean", None, Y, A, propensity, pred_labeled, None, pred_unlabeled, arm, lam, **kw
    ).theta_


def ppai_mean_ci(
    Y: ArrayLike,
    A: ArrayLike,
    propensity: ArrayLike,
    pred_labeled: ArrayLike,
    pred_unlabeled: ArrayLike,
    *,
    arm: Arm,
    alpha: float = 0.1,
    alternative: Alternative = "two-sided",
    lam: Lam = None,
    **kw: Any,
) -> tuple[Array, Array]:
    """PPAI confidence interval for the mean outcome of ``arm``: ``(lower, upper)``."""
    est = _fit("mean", None, Y, A, propensity, pred_labeled, None, pred_unlabeled, arm, lam, **kw)
    return _ci(est, alpha, alternative)


def ppai_mean_pval(
    Y: ArrayLike,
    A: ArrayLike,
    propensity: ArrayLike,
    pred_labeled: ArrayLike,
    pred_unlabeled: ArrayLike,
    *,
    arm: Arm,
    null: float = 0.0,
    alternative: Alternative = "two-sided",
    lam: Lam = None,
    **kw: Any,
) -> Array:
    """PPAI p-value for H0: mean outcome of ``arm`` = ``null`` (a length-1 array, as ``ppi_py``)."""
    est = _fit("mean", None, Y, A, propensity, pred_labeled, None, pred_unlabeled, arm, lam, **kw)
    return est.pvalue(null, alternative)


def ppai_effect_ci(
    Y: ArrayLike,
    A: ArrayLike,
    propensity: ArrayLike,
    pred_labeled: ArrayLike,
    pred_unlabeled: ArrayLike,
    *,
    treatment: int,
    control: int,
    alpha: float = 0.1,
    lam: Lam = None,
    **kw: Any,
) -> dict[str, float]:
    """Estimate, SE, interval and p-value of the effect μ_treatment − μ_control (an A/B test).

    ``pred_unlabeled`` must be ``(N, K)``: predictions for both arms on the pool. λ is tuned for the
    variance of the effect itself (``coord=[1, -1]``) unless ``coord`` is given.
    """
    kw.setdefault("coord", [1.0, -1.0])
    est = _fit(
        "mean",
        None,
        Y,
        A,
        propensity,
        pred_labeled,
        None,
        pred_unlabeled,
        [treatment, control],
        lam,
        **kw,
    )
    return est.contrast([1.0, -1.0], alpha)


def ppai_policy_value_ci(
    Y: ArrayLike,
    A: ArrayLike,
    propensity: ArrayLike,
    pred_labeled: ArrayLike,
    pred_unlabeled: ArrayLike,
    *,
    target_policy: TargetPolicy,
    X: ArrayLike | None = None,
    X_unlabeled: ArrayLike | None = None,
    alpha: float = 0.1,
    lam: Lam = None,
    **kw: Any,
) -> tuple[Array, Array]:
    """PPAI interval for the off-policy value E[Σ_a π_e(a|X) Y(a)] of ``target_policy``.

    ``target_policy`` maps contexts to ``(n, K)`` probabilities (pass ``X``/``X_unlabeled``), or is a
    fixed length-K vector.
    """
    est = PPAI("mean", target_policy=target_policy, lam="auto" if lam is None else lam, **kw)
    est.fit(X, A, Y, propensity, pred_labeled, X_unlabeled, pred_unlabeled)
    return _ci(est, alpha, "two-sided")


def _regression_api(problem: str, model: str) -> tuple[Callable[..., Any], ...]:
    """``ppai_<problem>_{pointestimate,ci,pval}`` for a regression problem (OLS, logistic): the three
    share their arguments, ``ppi_py``'s ``X, Y`` first, then ``A, propensity``."""

    def pointestimate(
        X: ArrayLike,
        Y: ArrayLike,
        A: ArrayLike,
        propensity: ArrayLike,
        pred_labeled: ArrayLike,
        X_unlabeled: ArrayLike,
        pred_unlabeled: ArrayLike,
        *,
        arm: Arm,
        lam: Lam = None,
        **kw: Any,
    ) -> Array:
        args = (X, Y, A, propensity, pred_labeled, X_unlabeled, pred_unlabeled, arm, lam)
        return _fit(problem, *args, **kw).theta_

    def ci(
        X: ArrayLike,
        Y: ArrayLike,
        A: ArrayLike,
        propensity: ArrayLike,
        pred_labeled: ArrayLike,
        X_unlabeled: ArrayLike,
        pred_unlabeled: ArrayLike,
        *,
        arm: Arm,
        alpha: float = 0.1,
        alternative: Alternative = "two-sided",
        lam: Lam = None,
        **kw: Any,
    ) -> tuple[Array, Array]:
        args = (X, Y, A, propensity, pred_labeled, X_unlabeled, pred_unlabeled, arm, lam)
        return _ci(_fit(problem, *args, **kw), alpha, alternative)

    def pval(
        X: ArrayLike,
        Y: ArrayLike,
        A: ArrayLike,
        propensity: ArrayLike,
        pred_labeled: ArrayLike,
        X_unlabeled: ArrayLike,
        pred_unlabeled: ArrayLike,
        *,
        arm: Arm,
        null: float | Array = 0.0,
        alternative: Alternative = "two-sided",
        lam: Lam = None,
        **kw: Any,
    ) -> Array:
        args = (X, Y, A, propensity, pred_labeled, X_unlabeled, pred_unlabeled, arm, lam)
        return _fit(problem, *args, **kw).pvalue(null, alternative)

    docs = {
        pointestimate: f"PPAI estimate of the coefficients of the {model}.",
        ci: f"PPAI intervals for the coefficients of the {model}: ``(lower, upper)`` arrays.",
        pval: f"PPAI p-values for H0: coefficient j of the {model} equals ``null`` (each j).",
    }
    for fn, doc in docs.items():
        fn.__name__ = fn.__qualname__ = f"ppai_{problem}_{fn.__name__}"
        fn.__doc__ = doc
    return pointestimate, ci, pval


ppai_ols_pointestimate, ppai_ols_ci, ppai_ols_pval = _regression_api(
    "ols", "least-squares regression of Y(arm) on X"
)
ppai_logistic_pointestimate, ppai_logistic_ci, ppai_logistic_pval = _regression_api(
    "logistic", "logistic regression of binary Y(arm) on X"
)


def ppai_quantile_pointestimate(
    Y: ArrayLike,
    A: ArrayLike,
    propensity: ArrayLike,
    pred_labeled: ArrayLike,
    pred_unlabeled: ArrayLike,
    *,
    arm: int,
    q: float,
    lam: Lam = None,
    **kw: Any,
) -> float:
    """PPAI estimate of the q-quantile of Y(arm)."""
    return _scalar(
        _fit(
            "quantile",
            None,
            Y,
            A,
            propensity,
            pred_labeled,
            None,
            pred_unlabeled,
            arm,
            lam,
            q=q,
            **kw,
        ).theta_
    )


def ppai_quantile_ci(
    Y: ArrayLike,
    A: ArrayLike,
    propensity: ArrayLike,
    pred_labeled: ArrayLike,
    pred_unlabeled: ArrayLike,
    *,
    arm: int,
    q: float,
    alpha: float = 0.1,
    lam: Lam = None,
    method: Literal["wald", "inversion"] = "wald",
    **kw: Any,
) -> Array:
    """PPAI interval for the q-quantile of Y(arm).

    ``method="wald"``: θ̂ ± z·se with a kernel-density plug-in for the Jacobian. ``"inversion"``:
    the grid values where the test of Ψ_λ(θ) = 0 does not reject, as ``ppi_py.ppi_quantile_ci`` (no
    density estimate; one target arm, ``weighting`` ``"ipw"`` or ``"none"``). λ is tuned (or given)
    as for the Wald interval.
    """
    if method not in ("wald", "inversion"):
        raise ValueError(f"method must be 'wald' or 'inversion', got {method!r}")
    est = _fit(
        "quantile", None, Y, A, propensity, pred_labeled, None, pred_unlabeled, arm, lam, q=q, **kw
    )
    if method == "wald":
        lo, hi = _ci(est, alpha, "two-sided")
        return np.array([lo[0], hi[0]])
    return np.array(quantile_inversion_interval(est.blocks_[0], q, float(np.mean(est.lam_)), alpha))


def ipw_ci(
    problem: str | ZProblem,
    X: ArrayLike | None,
    Y: ArrayLike,
    A: ArrayLike,
    propensity: ArrayLike,
    *,
    arm: Arm,
    alpha: float = 0.1,
    **kw: Any,
) -> tuple[Array, Array]:
    """Baseline: labeled-only IPW Z-estimation (λ = 0; predictions unused)."""
    X_pool = None if X is None else np.asarray(X)[:0]
    est = PPAI(problem, target_arm=arm, lam=0.0, **kw)
    est.fit(X, A, Y, propensity, np.zeros(np.shape(Y)[0]), X_pool, np.zeros(0))
    return _ci(est, alpha, "two-sided")


def ppi_ignoring_adaptivity_ci(
    problem: str | ZProblem,
    X: ArrayLike | None,
    Y: ArrayLike,
    A: ArrayLike,
    pred_labeled: ArrayLike,
    X_unlabeled: ArrayLike | None,
    pred_unlabeled: ArrayLike,
    *,
    arm: int,
    alpha: float = 0.1,
    lam: Lam = None,
    **kw: Any,
) -> tuple[Array, Array]:
    """Baseline: PPI++ on the rounds that played ``arm``, as if they were an i.i.d. sample.

    Propensities are ignored (none are needed); equal to ``ppi_py``'s PPI++ on that subsample.
    """
    T = np.shape(Y)[0]
    est = PPAI(problem, target_arm=arm, lam="auto" if lam is None else lam, weighting="none", **kw)
    est.fit(X, A, Y, np.ones(T), pred_labeled, X_unlabeled, pred_unlabeled)
    return _ci(est, alpha, "two-sided")


def from_obp(bandit_feedback: dict[str, Any]) -> dict[str, Any]:
    """``fit``'s labeled keywords from an ``obp`` bandit-feedback dict.

    obp names the arrays ``context``, ``action``, ``reward`` and ``pscore`` (the logged propensity of
    the played action); this maps them to ``X``, ``A``, ``Y`` and ``propensity``. Add the predictions
    and the pool: ``PPAI(...).fit(**from_obp(fb), pred_labeled=..., X_unlabeled=...,
    pred_unlabeled=...)``.
    """
    missing = [k for k in ("action", "reward", "pscore") if k not in bandit_feedback]
    if missing:
        raise ValueError(f"bandit_feedback lacks the obp key(s) {missing}")
    return {
        "X": bandit_feedback.get("context"),
        "A": bandit_feedback["action"],
        "Y": bandit_feedback["reward"],
        "propensity": bandit_feedback["pscore"],
    }
