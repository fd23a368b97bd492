"""K = 1 and π ≡ 1 (no adaptivity): PPAI is PPI++ (spec §2.3 sanity reduction, §6.1)."""

import numpy as np
import ppai
import pytest


@pytest.fixture
def ppi_py(monkeypatch):
    """ppi_py with its numba-jitted helpers replaced by their Python originals: compiling them takes
    tens of seconds, longer than running them on these small samples."""
    module = pytest.importorskip("ppi_py")
    for name in ("_ols_get_stats", "_logistic_get_stats"):
        jitted = getattr(module.ppi, name)
        monkeypatch.setattr(module.ppi, name, getattr(jitted, "py_func", jitted))
    return module


def test_mean_reduces_to_ppi_plus_plus_closed_forms(make_iid):
    d = make_iid(0)
    Y, f, f_u, T, N = d["Y"], d["f"], d["f_u"], len(d["Y"]), len(d["f_u"])
    for lam in (0.0, 0.37, 1.0):
        est = ppai.ppai_mean_pointestimate(Y, d["A"], d["pi"], f, f_u, arm=0, lam=lam)
        assert est == pytest.approx(lam * f_u.mean() + (Y - lam * f).mean(), abs=1e-12)
    # The tuned λ for the mean: Cov(Y, f) / (Var f + (T/N) Var f̃) — the score covariances of the
    # mean do not depend on θ, so the pilot does not matter.
    fit = ppai.PPAI("mean", target_arm=0).fit(None, d["A"], Y, d["pi"], f, None, f_u)
    lam_star = np.cov(Y, f)[0, 1] / (np.var(f, ddof=1) + T / N * np.var(f_u, ddof=1))
    assert fit.lam_ == pytest.approx(lam_star, rel=1e-10)
    var = np.var(Y - lam_star * f, ddof=1) / T + lam_star**2 * np.var(f_u, ddof=1) / N
    assert fit.se_[0] == pytest.approx(np.sqrt(var), rel=1e-10)


@pytest.mark.filterwarnings("ignore::FutureWarning")  # sklearn's, from inside ppi_py
def test_matches_ppi_py_at_fixed_lambda(make_iid, ppi_py):
    d = make_iid(1)
    X, Y, f, X_u, f_u, A, pi = (d[k] for k in ("X", "Y", "f", "X_u", "f_u", "A", "pi"))
    ones, ones_u = np.ones((len(Y), 1)), np.ones((len(f_u), 1))
    for lam in (0.0, 0.4, 1.0):
        ours = ppai.ppai_mean_pointestimate(Y, A, pi, f, f_u, arm=0, lam=lam)
        assert ours == pytest.approx(
            float(ppi_py.ppi_mean_pointestimate(Y, f, f_u, lam=lam)[0]), abs=1e-12
        )
        # ppi_py's mean interval uses ddof=0; its OLS-on-an-intercept interval is the same with ddof=1.
        lo, hi = ppai.ppai_mean_ci(Y, A, pi, f, f_u, arm=0, lam=lam, alpha=0.1)
        ref = ppi_py.ppi_ols_ci(ones, Y, f, ones_u, f_u, lam=lam, alpha=0.1)
        np.testing.assert_allclose([lo, hi], [ref[0][0], ref[1][0]], rtol=1e-10)
    # Logistic: ppi_py minimises the rectified loss, whose gradient is our estimating equation.
    rng = np.random.default_rng(2)
    Yb = (rng.random(len(Y)) < 1 / (1 + np.exp(-X @ [0.2, 0.8, -0.5]))).astype(float)
    fb = np.clip(0.7 * Yb + 0.15 + 0.1 * rng.standard_normal(len(Y)), 0, 1)
    fb_u = 1 / (1 + np.exp(-X_u @ [0.2, 0.8, -0.5]))
    for lam in (0.0, 0.5):
        ours = ppai.ppai_logistic_ci(X, Yb, A, pi, fb, X_u, fb_u, arm=0, lam=lam, alpha=0.1)
        ref = ppi_py.ppi_logistic_ci(X, Yb, fb, X_u, fb_u, lam=lam, alpha=0.1)
        np.testing.assert_allclose(np.ravel(ours), np.ravel(ref), atol=1e-6)
    # OLS at λ = 0 is classical OLS with sandwich errors in both.
    ours = ppai.ppai_ols_ci(X, Y, A, pi, f, X_u, f_u, arm=0, lam=0.0, alpha=0.1)
    ref = ppi_py.ppi_ols_ci(X, Y, f, X_u, f_u, lam=0.0, alpha=0.1)
    np.testing.assert_allclose(np.ravel(ours), np.ravel(ref), rtol=1e-10)


def test_close_to_ppi_py_where_the_plug_ins_differ(make_iid, ppi_py):
    """Tuned λ (ppi_py pools the two prediction samples' variance) and OLS at λ > 0 (ppi_py sums two
    separate regressions; PPAI solves the joint equation): equal to first order, not to round-off."""
    d = make_iid(3, n=2000, N=10000)
    X, Y, f, X_u, f_u, A, pi = (d[k] for k in ("X", "Y", "f", "X_u", "f_u", "A", "pi"))
    lo, hi = ppai.ppai_mean_ci(Y, A, pi, f, f_u, arm=0, alpha=0.1)
    ref = ppi_py.ppi_mean_ci(Y, f, f_u, alpha=0.1)
    np.testing.assert_allclose([lo, hi], np.ravel(ref), atol=0.02 * (hi - lo))
    ours = ppai.PPAI("ols", target_arm=0, alpha=0.1).fit(X, A, Y, pi, f, X_u, f_u)
    ref_lo, ref_hi = ppi_py.ppi_ols_ci(X, Y, f, X_u, f_u, alpha=0.1)
    width = ours.conf_int()[:, 1] - ours.conf_int()[:, 0]
    np.testing.assert_allclose(ours.conf_int()[:, 0], ref_lo, atol=0.05 * width.max())
    np.testing.assert_allclose(width, ref_hi - ref_lo, rtol=0.03)


def test_quantile_matches_ppi_py_and_the_asymptotic_standard_error(ppi_py):
    """Point estimate: ppi_py's exact-grid rectified quantile (λ = 1, up to ties) and the sample
    quantile (λ = 0) exactly. Interval: Wald with a kernel-density Jacobian (ours) vs ppi_py's test inversion, close
    but not equal; at λ = 0 the standard error is the textbook sqrt(q(1 − q)/n) / φ(Φ⁻¹(q))."""
    from scipy.stats import norm

    rng = np.random.default_rng(0)
    n, N = 1000, 3000  # ppi_py's exact grid is O((n + N)²): keep it small
    Y, Y_u = rng.standard_normal(n), rng.standard_normal(N)
    f, f_u = Y + 0.5 * rng.standard_normal(n), Y_u + 0.5 * rng.standard_normal(N)
    A, pi = np.zeros(n, int), np.ones(n)
    for q in (0.5, 0.3):  # q·n is an integer, so the sample quantile is unambiguous
        ours = ppai.ppai_quantile_pointestimate(Y, A, pi, f, f_u, arm=0, q=q, lam=1.0)
        ref = ppi_py.ppi_quantile_pointestimate(Y, f, f_u, q, exact_grid=True)
        # Both minimise |rectified CDF − q| over the same grid; exact ties may break differently.
        gap = np.abs(ppi_py.ppi._rectified_cdf(Y, f, f_u, np.array([ours, ref])) - q)
        assert gap[0] <= gap[1] + 1e-12
        lo, hi = ppai.ppai_quantile_ci(Y, A, pi, f, f_u, arm=0, q=q, lam=1.0, alpha=0.1)
        ref_lo, ref_hi = ppi_py.ppi_quantile_ci(Y, f, f_u, q, alpha=0.1)
        assert lo < ours < hi
        assert hi - lo == pytest.approx(ref_hi - ref_lo, rel=0.25)
        assert max(abs(lo - ref_lo), abs(hi - ref_hi)) < 0.3 * (ref_hi - ref_lo)
        # The test-inversion interval is ppi_py's (same grid; ddof may move an end by a grid step).
        inv = ppai.ppai_quantile_ci(
            Y, A, pi, f, f_u, arm=0, q=q, lam=1.0, alpha=0.1, method="inversion"
        )
        values = np.r_[Y, f, f_u]
        step = (values.max() - values.min()) / 4999
        np.testing.assert_allclose(inv, [ref_lo, ref_hi], atol=1.01 * step)
        fit = ppai.PPAI("quantile", target_arm=0, lam=0.0, q=q).fit(None, A, Y, pi, f, None, f_u)
        assert fit.theta_[0] == np.quantile(Y, q, method="inverted_cdf")
        textbook = np.sqrt(q * (1 - q) / n) / norm.pdf(norm.ppf(q))
        assert fit.se_[0] == pytest.approx(textbook, rel=0.1)
