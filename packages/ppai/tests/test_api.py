"""Issue 26 §5: the estimator in scikit-learn's and statsmodels' idiom; the functional API in ppi_py's."""

import numpy as np
import ppai
import pytest


def test_sklearn_protocol(make_bandit):
    sklearn_base = pytest.importorskip("sklearn.base")
    d = make_bandit(0)
    est = ppai.PPAI("ols", target_arm=1, lam_mode="element", alpha=0.1)
    params = est.get_params()
    assert params["problem"] == "ols" and params["lam_mode"] == "element"
    twin = sklearn_base.clone(est)
    assert twin is not est and twin.get_params() == params and not hasattr(twin, "theta_")
    assert est.set_params(alpha=0.2) is est and est.alpha == 0.2
    with pytest.raises(ValueError, match="invalid parameter 'lamda'"):
        est.set_params(lamda=0.5)
    assert repr(est) == "PPAI(target_arm=1, lam_mode='element', alpha=0.2, problem='ols')"
    assert repr(ppai.PPAI()) == "PPAI()"
    X = np.c_[np.ones(len(d["Y"])), d["X"]]
    d = dict(d, X=X, X_unlabeled=np.c_[np.ones(len(d["X_unlabeled"])), d["X_unlabeled"]])
    a, b = est.fit(**d), sklearn_base.clone(est).fit(**d)
    np.testing.assert_array_equal(a.theta_, b.theta_)


def test_statsmodels_results(make_bandit):
    d = make_bandit(1)
    fit = ppai.PPAI("mean", target_arm=[1, 0]).fit(**d)
    np.testing.assert_array_equal(fit.params, fit.theta_)
    np.testing.assert_array_equal(fit.bse, fit.se_)
    np.testing.assert_array_equal(fit.pvalues, fit.pvalue(0.0))
    np.testing.assert_allclose(
        fit.conf_int(0.1), ppai.estimator.z_interval(fit.theta_, fit.se_, 0.1)
    )
    text = fit.summary()
    assert "coef" in text and "P>|z|" in text and f"{fit.theta_[0]:.4g}" in text
    assert f"T = {fit.n_labeled_}" in text


def test_functional_api_follows_ppi_py(make_bandit):
    d = make_bandit(2)
    args = (d["Y"], d["A"], d["propensity"], d["pred_labeled"], d["pred_unlabeled"])
    lo, hi = ppai.ppai_mean_ci(*args, arm=1)  # ppi_py's default alpha = 0.1
    ref = ppai.PPAI("mean", target_arm=1).fit(**d).conf_int(0.1)[0]
    np.testing.assert_allclose([lo, hi], ref, rtol=1e-12)
    X = np.c_[np.ones(len(d["Y"])), d["X"]]
    X_u = np.c_[np.ones(len(d["X_unlabeled"])), d["X_unlabeled"]]
    reg = (X, d["Y"], d["A"], d["propensity"], d["pred_labeled"], X_u, d["pred_unlabeled"])
    named = ppai.ppai_ols_pointestimate(*reg, arm=1, lam_optim_mode="element")
    ours = ppai.PPAI("ols", target_arm=1, lam_mode="element").fit(
        X, d["A"], d["Y"], d["propensity"], d["pred_labeled"], X_u, d["pred_unlabeled"]
    )
    np.testing.assert_array_equal(named, ours.theta_)


def test_obp_names(make_bandit):
    d = make_bandit(3)
    feedback = {
        "context": d["X"],
        "action": d["A"],
        "reward": d["Y"],
        "pscore": d["propensity"][np.arange(len(d["A"])), d["A"]],
        "n_rounds": len(d["A"]),
    }
    kw = ppai.from_obp(feedback)
    fit = ppai.PPAI("mean", target_arm=1).fit(
        **kw,
        pred_labeled=d["pred_labeled"],
        X_unlabeled=d["X_unlabeled"],
        pred_unlabeled=d["pred_unlabeled"],
    )
    np.testing.assert_allclose(fit.theta_, ppai.PPAI("mean", target_arm=1).fit(**d).theta_)
    with pytest.raises(ValueError, match=r"lacks the obp key\(s\) \['pscore'\]"):
        ppai.from_obp({"action": 1, "reward": 2})


def test_sqrt_stabilized_warns_unless_the_policy_is_context_free(make_bandit):
    d = make_bandit(4)
    with pytest.warns(UserWarning, match="biased when the logging policy uses the context"):
        ppai.PPAI("mean", target_arm=1, weighting="sqrt_stabilized").fit(**d)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ppai.PPAI("mean", target_arm=1, weighting="sqrt_stabilized", context_free_policy=True).fit(
            **d
        )
