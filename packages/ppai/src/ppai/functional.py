"""A functional API in ``ppi_py``'s style: ``ppai_<problem>_{pointestimate,ci,pval}``.

As in ``ppi_py``, ``lam=None`` tunes λ; ``lam=0`` is the labeled-only IPW estimator, ``lam=1`` plain
PPI with an IPW rectifier. Intervals are returned as ``(lower, upper)`` arrays (scalars for the mean
and quantile). Unlike ``ppi_py`` the default ``alpha`` is 0.05 (the spec's default).
The baselines are here too: :func:`ipw_ci` (labeled-only) and :func:`ppi_ignoring_adaptivity_ci`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ppai.estimator import PPAI, Alternative
from ppai.problems import Array


def _fit(
    problem: str,
    X: Any,
    Y: Any,
    A: Any,
    propensity: Any,
    pred_labeled: Any,
    X_unlabeled: Any,
    pred_unlabeled: Any,
    arm: Any,
    lam: Any,
    **kw: Any,
) -> PPAI:
    return PPAI(problem, target_arm=arm, lam="auto" if lam is None else lam, **kw).fit(
        X, A, Y, propensity, pred_labeled, X_unlabeled, pred_unlabeled
    )


def _scalar(values: Array) -> Any:
    return float(values[0]) if values.shape == (1,) else values


def _ci(est: PPAI, alpha: float, alternative: Alternative) -> tuple[Any, Any]:
    ci = est.conf_int(alpha, alternative)
    return _scalar(ci[:, 0]), _scalar(ci[:, 1])


def ppai_mean_pointestimate(
    Y, A, propensity, pred_labeled, pred_unlabeled, *, arm, lam=None, **kw
) -> float:
    """PPAI estimate of the mean outcome of ``arm`` (``arm`` may also be a list: a vector of means)."""
    return _scalar(
        _fit(
            "mean", None, Y, A, propensity, pred_labeled, None, pred_unlabeled, arm, lam, **kw
        ).theta_
    )


def ppai_mean_ci(
    Y,
    A,
    propensity,
    pred_labeled,
    pred_unlabeled,
    *,
    arm,
    alpha=0.05,
    alternative: Alternative = "two-sided",
    lam=None,
    **kw,
) -> tuple[Any, Any]:
    """PPAI confidence interval for the mean outcome of ``arm``: ``(lower, upper)``."""
    est = _fit("mean", None, Y, A, propensity, pred_labeled, None, pred_unlabeled, arm, lam, **kw)
    return _ci(est, alpha, alternative)


def ppai_mean_pval(
    Y,
    A,
    propensity,
    pred_labeled,
    pred_unlabeled,
    *,
    arm,
    null=0.0,
    alternative: Alternative = "two-sided",
    lam=None,
    **kw,
) -> Any:
    """PPAI p-value for H0: mean outcome of ``arm`` = ``null``."""
    est = _fit("mean", None, Y, A, propensity, pred_labeled, None, pred_unlabeled, arm, lam, **kw)
    return _scalar(est.pvalue(null, alternative))


def ppai_effect_ci(
    Y,
    A,
    propensity,
    pred_labeled,
    pred_unlabeled,
    *,
    treatment,
    control,
    alpha=0.05,
    lam=None,
    **kw,
) -> dict[str, float]:
    """Estimate, SE, interval and p-value of the effect μ_treatment − μ_control (an A/B test).

    ``pred_unlabeled`` must be ``(N, K)``: predictions for both arms on the pool.
    """
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
    Y,
    A,
    propensity,
    pred_labeled,
    pred_unlabeled,
    *,
    target_policy,
    X=None,
    X_unlabeled=None,
    alpha=0.05,
    lam=None,
    **kw,
) -> tuple[float, float]:
    """PPAI interval for the off-policy value E[Σ_a π_e(a|X) Y(a)] of ``target_policy``.

    ``target_policy`` maps contexts to ``(n, K)`` probabilities (pass ``X``/``X_unlabeled``), or is a
    fixed length-K vector.
    """
    est = PPAI("mean", target_policy=target_policy, lam="auto" if lam is None else lam, **kw)
    est.fit(X, A, Y, propensity, pred_labeled, X_unlabeled, pred_unlabeled)
    return _ci(est, alpha, "two-sided")


def ppai_ols_pointestimate(
    X, Y, A, propensity, pred_labeled, X_unlabeled, pred_unlabeled, *, arm, lam=None, **kw
) -> Array:
    """PPAI estimate of the coefficients of the regression of Y(arm) on X."""
    return _fit(
        "ols", X, Y, A, propensity, pred_labeled, X_unlabeled, pred_unlabeled, arm, lam, **kw
    ).theta_


def ppai_ols_ci(
    X,
    Y,
    A,
    propensity,
    pred_labeled,
    X_unlabeled,
    pred_unlabeled,
    *,
    arm,
    alpha=0.05,
    alternative: Alternative = "two-sided",
    lam=None,
    **kw,
) -> tuple[Array, Array]:
    """PPAI intervals for the OLS coefficients of Y(arm) on X: ``(lower, upper)`` arrays."""
    est = _fit(
        "ols", X, Y, A, propensity, pred_labeled, X_unlabeled, pred_unlabeled, arm, lam, **kw
    )
    return _ci(est, alpha, alternative)


def ppai_ols_pval(
    X,
    Y,
    A,
    propensity,
    pred_labeled,
    X_unlabeled,
    pred_unlabeled,
    *,
    arm,
    null=0.0,
    alternative: Alternative = "two-sided",
    lam=None,
    **kw,
) -> Array:
    """PPAI p-values for H0: OLS coefficient j of Y(arm) on X equals ``null`` (each j)."""
    est = _fit(
        "ols", X, Y, A, propensity, pred_labeled, X_unlabeled, pred_unlabeled, arm, lam, **kw
    )
    return est.pvalue(null, alternative)


def ppai_logistic_pointestimate(
    X, Y, A, propensity, pred_labeled, X_unlabeled, pred_unlabeled, *, arm, lam=None, **kw
) -> Array:
    """PPAI estimate of the logistic-regression coefficients of binary Y(arm) on X."""
    return _fit(
        "logistic", X, Y, A, propensity, pred_labeled, X_unlabeled, pred_unlabeled, arm, lam, **kw
    ).theta_


def ppai_logistic_ci(
    X,
    Y,
    A,
    propensity,
    pred_labeled,
    X_unlabeled,
    pred_unlabeled,
    *,
    arm,
    alpha=0.05,
    alternative: Alternative = "two-sided",
    lam=None,
    **kw,
) -> tuple[Array, Array]:
    """PPAI intervals for the logistic-regression coefficients: ``(lower, upper)`` arrays."""
    est = _fit(
        "logistic", X, Y, A, propensity, pred_labeled, X_unlabeled, pred_unlabeled, arm, lam, **kw
    )
    return _ci(est, alpha, alternative)


def ppai_logistic_pval(
    X,
    Y,
    A,
    propensity,
    pred_labeled,
    X_unlabeled,
    pred_unlabeled,
    *,
    arm,
    null=0.0,
    alternative: Alternative = "two-sided",
    lam=None,
    **kw,
) -> Array:
    """PPAI p-values for H0: logistic coefficient j of binary Y(arm) on X equals ``null``."""
    est = _fit(
        "logistic", X, Y, A, propensity, pred_labeled, X_unlabeled, pred_unlabeled, arm, lam, **kw
    )
    return est.pvalue(null, alternative)


def ppai_quantile_pointestimate(
    Y, A, propensity, pred_labeled, pred_unlabeled, *, arm, q, lam=None, **kw
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
    Y, A, propensity, pred_labeled, pred_unlabeled, *, arm, q, alpha=0.05, lam=None, **kw
) -> tuple[float, float]:
    """PPAI Wald interval for the q-quantile of Y(arm) (kernel density plug-in for the Jacobian)."""
    est = _fit(
        "quantile", None, Y, A, propensity, pred_labeled, None, pred_unlabeled, arm, lam, q=q, **kw
    )
    return _ci(est, alpha, "two-sided")


def ipw_ci(problem, X, Y, A, propensity, *, arm, alpha=0.05, **kw) -> tuple[Any, Any]:
    """Baseline: labeled-only IPW Z-estimation (λ = 0; predictions unused)."""
    X_pool = None if X is None else np.asarray(X)[:0]
    est = PPAI(problem, target_arm=arm, lam=0.0, **kw)
    est.fit(X, A, Y, propensity, np.zeros(np.shape(Y)[0]), X_pool, np.zeros(0))
    return _ci(est, alpha, "two-sided")


def ppi_ignoring_adaptivity_ci(
    problem, X, Y, A, pred_labeled, X_unlabeled, pred_unlabeled, *, arm, alpha=0.05, lam=None, **kw
) -> tuple[Any, Any]:
    """Baseline: PPI++ on the rounds that played ``arm``, as if they were an i.i.d. sample.

    Propensities are ignored (none are needed); equal to ``ppi_py``'s PPI++ on that subsample.
    """
    T = np.shape(Y)[0]
    est = PPAI(problem, target_arm=arm, lam="auto" if lam is None else lam, weighting="none", **kw)
    est.fit(X, A, Y, np.ones(T), pred_labeled, X_unlabeled, pred_unlabeled)
    return _ci(est, alpha, "two-sided")
