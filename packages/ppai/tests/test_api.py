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
    assert repr(est) == "PPAI('ols', target_arm=1, lam_mode='element', alpha=0.2)"
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
    np.testing.assert_allclose(np.r_[lo, hi], ref, rtol=1e-12)
    X = np.c_[np.ones(len(d["Y"])), d["X"]]
    X_u = np.c_[np.ones(len(d["X_unlabeled"])), d["X_unlabeled"]]
    reg = (X, d["Y"], d["A"], d["propensity"], d["pred_labeled"], X_u, d["pred_unlabeled"])
    named = ppai.ppai_ols_pointestimate(*reg, arm=1, lam_optim_mode="element")
    ours = ppai.PPAI("ols", target_arm=1, lam_mode="element").fit(
        X, d["A"], d["Y"], d["propensity"], d["pred_labeled"], X_u, d["pred_unlabeled"]
    )
    np.testing.assert_array_equal(named, ours.theta_)


def test_functional_return_types_are_ppi_py_s(make_bandit):
    """Mean estimates, intervals and p-values are length-1 arrays (ppi_py code indexing ``lo[0]``
    works); a quantile estimate is a float and its interval a length-2 array."""
    d = make_bandit(2)
    args = (d["Y"], d["A"], d["propensity"], d["pred_labeled"], d["pred_unlabeled"])
    lo, hi = ppai.ppai_mean_ci(*args, arm=1)
    assert lo.shape == hi.shape == (1,) and lo[0] < hi[0]
    assert ppai.ppai_mean_pointestimate(*args, arm=1).shape == (1,)
    assert ppai.ppai_mean_pval(*args, arm=1).shape == (1,)
    assert isinstance(ppai.ppai_quantile_pointestimate(*args, arm=1, q=0.5), float)
    assert ppai.ppai_quantile_ci(*args, arm=1, q=0.5).shape == (2,)


def test_sample_weights_as_ppi_py(make_iid, monkeypatch):
    """``w``/``w_unlabeled`` (ppi_py's names): π ≡ 1 gives ppi_py's weighted OLS interval at fixed λ;
    integer weights equal repeating the rows."""
    ppi_py = pytest.importorskip("ppi_py")
    jitted = ppi_py.ppi._ols_get_stats  # numba compilation takes longer than these small fits
    monkeypatch.setattr(ppi_py.ppi, "_ols_get_stats", getattr(jitted, "py_func", jitted))
    d = make_iid(3, n=120, N=300)
    X, Y, f, X_u, f_u, A, pi = (d[k] for k in ("X", "Y", "f", "X_u", "f_u", "A", "pi"))
    rng = np.random.default_rng(0)
    w, w_u = rng.integers(1, 4, len(Y)).astype(float), rng.integers(1, 4, len(f_u)).astype(float)
    for lam in (0.0, 0.5, 1.0):
        lo, hi = ppai.ppai_ols_ci(X, Y, A, pi, f, X_u, f_u, arm=0, lam=lam, w=w, w_unlabeled=w_u)
        ref_lo, ref_hi = ppi_py.ppi_ols_ci(X, Y, f, X_u, f_u, lam=lam, w=w, w_unlabeled=w_u)
        np.testing.assert_allclose(np.c_[lo, hi], np.c_[ref_lo, ref_hi], rtol=1e-8)
    # Weights are point-estimate equivalent to repeated rows.
    r, ru = (
        np.repeat(np.arange(len(Y)), w.astype(int)),
        np.repeat(np.arange(len(f_u)), w_u.astype(int)),
    )
    fit = ppai.PPAI("mean", target_arm=0, lam=0.5).fit(
        None, A, Y, pi, f, None, f_u, w=w, w_unlabeled=w_u
    )
    rep = ppai.PPAI("mean", target_arm=0, lam=0.5).fit(None, A[r], Y[r], pi[r], f[r], None, f_u[ru])
    assert fit.theta_[0] == pytest.approx(rep.theta_[0], rel=1e-12)
    with pytest.raises(ValueError, match="w must have shape"):
        ppai.PPAI("mean", target_arm=0).fit(None, A, Y, pi, f, None, f_u, w=w[:-1])
    with pytest.raises(ValueError, match="non-negative"):
        ppai.PPAI("mean", target_arm=0).fit(None, A, Y, pi, f, None, f_u, w=-w)


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
