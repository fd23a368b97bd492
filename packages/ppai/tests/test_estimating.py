"""The maths: λ = 0 is labeled-only, closed forms equal Newton, Ψ(θ̂) = 0, tuned variance ≤ λ = 0."""

import numpy as np
import ppai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ppai.estimating import Block, equation, equation_jacobian, groups, newton_solve, solve


class NewtonOnly:
    """A user ZProblem wrapping a built-in one without its closed form, to force Newton's method."""

    def __init__(self, inner):
        self.inner = inner
        self.jacobian_uses_y = inner.jacobian_uses_y

    def dim(self, X):
        return self.inner.dim(X)

    def psi(self, theta, X, Y):
        return self.inner.psi(theta, X, Y)

    def jacobian(self, theta, X, Y, w):
        return self.inner.jacobian(theta, X, Y, w)

    def init(self, X, Y, w):
        return self.inner.init(X, Y, w) + 0.5  # away from the root, so Newton has work to do


def _fit(problem, d, arm=1, **kw):
    # d holds exactly fit's keywords (ppai.sim.Experiments.rep).
    return ppai.PPAI(problem, target_arm=arm, **kw).fit(**d)


def test_lambda_zero_is_the_labeled_only_ipw_estimator(make_bandit):
    d = make_bandit(0)
    fit = _fit("mean", d, lam=0.0)
    played = d["A"] == 1
    rho = played / d["propensity"][:, 1]
    # Hájek ratio Σ ρ Y / Σ ρ, predictions unused.
    assert fit.theta_[0] == pytest.approx((rho * d["Y"]).sum() / rho.sum(), rel=1e-12)
    other = dict(d, pred_labeled=d["pred_labeled"] + 5.0, pred_unlabeled=d["pred_unlabeled"] * 0)
    assert _fit("mean", other, lam=0.0).theta_[0] == fit.theta_[0]
    assert fit.theta_labeled_only_[0] == fit.theta_[0]
    # Constant propensity: the plain mean of the rounds that played the arm.
    T = len(d["Y"])
    flat = dict(d, propensity=np.full(T, 0.5))
    assert _fit("mean", flat, lam=0.0).theta_[0] == pytest.approx(d["Y"][played].mean(), rel=1e-12)
    # Without a pool the Jacobian is the labeled one, the Hájek normaliser ρ̄: ipw_ci's interval.
    lo, hi = ppai.ipw_ci("mean", None, d["Y"], d["A"], d["propensity"], arm=1, alpha=0.05)
    resid = rho * (d["Y"] - fit.theta_[0])
    se_hajek = np.std(resid, ddof=1) / np.sqrt(T) / rho.mean()
    np.testing.assert_allclose(
        np.r_[lo, hi], fit.theta_[0] + 1.959963984540054 * se_hajek * np.r_[-1, 1]
    )
    # With a pool, λ = 0 is the same labeled-only estimator (labeled Jacobian): one definition.
    with_pool = _fit("mean", d, lam=0.0)
    np.testing.assert_allclose(with_pool.conf_int(0.05)[0], np.r_[lo, hi], rtol=1e-12)
    # For λ ≠ 0 the Jacobian is pooled over all T + N contexts, as PPI++.
    N = len(d["pred_unlabeled"])
    H = (T * rho.mean() + N) / (T + N)
    tiny = _fit("mean", d, lam=1e-12)
    assert tiny.se_[0] == pytest.approx(np.std(resid, ddof=1) / np.sqrt(T) / H, rel=1e-6)


def test_ols_default_form_is_two_regressions(make_bandit):
    """ppi_py's form: the IPW-weighted rectifier regression plus λ times the pool's regression."""
    d = make_bandit(1)
    X, X_u = (
        np.c_[np.ones(len(d["Y"])), d["X"]],
        np.c_[np.ones(len(d["X_unlabeled"])), d["X_unlabeled"]],
    )
    d = dict(d, X=X, X_unlabeled=X_u)
    rho = (d["A"] == 1) / d["propensity"][:, 1]
    lam = 0.6
    f = d["pred_labeled"][:, 1]
    wls = lambda Z, y, w: np.linalg.solve((Z.T * w) @ Z, Z.T @ (w * y))  # noqa: E731
    expected = (
        wls(X, d["Y"] - lam * f, rho)
        + lam * np.linalg.lstsq(X_u, d["pred_unlabeled"][:, 1], rcond=None)[0]
    )
    np.testing.assert_allclose(_fit("ols", d, lam=lam).theta_, expected, rtol=1e-10)
    joint = _fit(ppai.OLSProblem(form="joint"), d, lam=lam).theta_
    assert np.max(np.abs(joint - expected)) > 1e-6  # a different (consistent) estimator


def test_ols_on_a_badly_scaled_full_rank_design_is_not_collinear(make_bandit):
    """Columns scaled by 1e4 and 1e-4 (Gram condition ~1e16, full rank): the fit succeeds and its
    coefficients are the unscaled fit's, rescaled (before: a false "collinear" error)."""
    d = make_bandit(1)
    X = np.c_[np.ones(len(d["Y"])), d["X"]]
    X_u = np.c_[np.ones(len(d["X_unlabeled"])), d["X_unlabeled"]]
    S = np.array([1.0, 1e4, 1e-4, 1.0])[: X.shape[1]]
    plain = _fit("ols", dict(d, X=X, X_unlabeled=X_u), lam=0.5).theta_
    scaled = _fit("ols", dict(d, X=X * S, X_unlabeled=X_u * S), lam=0.5).theta_
    np.testing.assert_allclose(scaled * S, plain, rtol=1e-6)


@pytest.mark.parametrize("lam", [0.0, 0.3, 1.0, "auto"])
def test_closed_forms_equal_newton(make_bandit, lam):
    d = make_bandit(1)
    X1 = np.c_[np.ones(len(d["Y"])), d["X"]]
    d = dict(d, X=X1, X_unlabeled=np.c_[np.ones(len(d["X_unlabeled"])), d["X_unlabeled"]])
    joint = ppai.OLSProblem(form="joint")
    for problem in (ppai.MeanProblem(), joint):
        closed = _fit(problem, d, lam=lam)
        newton = _fit(NewtonOnly(problem), d, lam=lam)
        np.testing.assert_allclose(newton.theta_, closed.theta_, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(newton.cov_, closed.cov_, rtol=1e-8)


def test_mean_closed_form_matches_the_spec(make_bandit):
    d = make_bandit(2)
    rho = (d["A"] == 0) / d["propensity"][:, 0]
    f, fu, Y = d["pred_labeled"][np.arange(len(d["A"])), d["A"]], d["pred_unlabeled"][:, 0], d["Y"]
    lam = 0.6
    expected = (lam * fu.mean() + (rho * (Y - lam * f)).mean()) / (lam + (1 - lam) * rho.mean())
    assert _fit("mean", d, arm=0, lam=lam).theta_[0] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("name", ["ols", "logistic"])
def test_equation_vanishes_at_the_estimate_and_jacobian_matches_finite_differences(name):
    rng = np.random.default_rng(3)
    T, N = 300, 900
    X = np.c_[np.ones(T), rng.standard_normal((T, 2))]
    X_u = np.c_[np.ones(N), rng.standard_normal((N, 2))]
    if name == "logistic":
        Y = (rng.random(T) < 0.4).astype(float)
        f, f_u = rng.random(T), rng.random(N)
    else:
        Y, f, f_u = rng.standard_normal(T), rng.standard_normal(T), rng.standard_normal(N)
    w = rng.uniform(0.5, 3.0, T)
    block = Block(X, Y, f, w, X_u, (f_u,), (np.ones(N),))
    problem = ppai.problems.resolve_problem(name)
    lam = np.array([0.7, 0.2, 0.9])
    theta = solve(problem, block, lam)
    g = groups(block, lam)
    assert np.abs(equation(problem, g, theta)).max() < 1e-10
    J = equation_jacobian(problem, g, theta)
    eps = 1e-6
    fd = np.column_stack(
        [
            (equation(problem, g, theta + eps * e) - equation(problem, g, theta - eps * e))
            / (2 * eps)
            for e in np.eye(3)
        ]
    )
    np.testing.assert_allclose(J, fd, rtol=1e-6, atol=1e-8)


def test_quantile_solver_matches_brute_force():
    rng = np.random.default_rng(4)
    T, N = 200, 600
    Y, f, f_u = rng.standard_normal(T), rng.standard_normal(T) + 0.1, rng.standard_normal(N)
    w = rng.uniform(0.5, 2.0, T)
    problem = ppai.QuantileProblem(0.3)
    block = Block(None, Y, f, w, None, (f_u,), (np.ones(N),))
    lam = np.array([0.8])
    theta = solve(problem, block, lam)[0]
    grid = np.unique(np.r_[Y, f, f_u])
    g = groups(block, lam)
    psi = np.array([equation(problem, g, np.array([v]))[0] for v in grid])
    assert theta == grid[np.argmin(np.abs(psi))]


def _random_stats(seed, D, T, N):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((T, D))
    b = 0.8 * a @ rng.standard_normal((D, D)) / np.sqrt(D) + rng.standard_normal((T, D))
    u = rng.standard_normal((N, D)) * rng.uniform(0.2, 2.0, D)
    H = rng.standard_normal((D, D)) + 3 * np.eye(D)
    c = lambda x, y: (x - x.mean(0)).T @ (y - y.mean(0)) / (len(x) - 1)  # noqa: E731
    return ppai.ScoreStats(c(a, a), c(a, b), c(b, b), c(u, u), H, T, N)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    D=st.integers(1, 4),
    T=st.integers(5, 200),
    N=st.integers(2, 2000),
    coord=st.one_of(st.none(), st.integers(0, 3), st.just("contrast")),
)
def test_tuned_variance_never_exceeds_labeled_only(seed, D, T, N, coord):
    stats = _random_stats(seed, D, T, N)
    if coord == "contrast":  # the variance of c·θ̂ for random weights c
        coord = np.random.default_rng(seed + 1).standard_normal(D)
        pick = lambda C: coord @ C @ coord  # noqa: E731
    else:
        coord = None if coord is None or coord >= D else coord
        pick = (lambda C: np.trace(C)) if coord is None else (lambda C: C[coord, coord])
    var = lambda L: ppai.covariance(stats, L)  # noqa: E731
    # ppi_py's plug-in (ddof=0 cross term) lies between 0 and the minimiser: never worse than 0.
    lam = ppai.tune_lambda(stats, coord=coord)
    assert pick(var(lam)) <= pick(var(np.zeros(D))) * (1 + 1e-12) + 1e-15
    # Element mode: no coordinate's variance above its λ = 0 value (issue 26 §1).
    element = ppai.tune_lambda(stats, mode="element")
    assert np.all(np.diag(var(element)) <= np.diag(var(np.zeros(D))) * (1 + 1e-12) + 1e-15)
    # The separate plug-in's λ̂ is the minimiser over [0, 1]: no grid point does better.
    lam = ppai.tune_lambda(stats, coord=coord, plugin="separate")
    assert pick(var(lam)) <= pick(var(np.zeros(D))) * (1 + 1e-12) + 1e-15
    grid = [pick(var(np.full(D, g))) for g in np.linspace(0, 1, 101)]
    assert pick(var(lam)) <= min(grid) * (1 + 1e-12) + 1e-15


def test_tuning_modes(make_bandit):
    d = make_bandit(5)
    # Regress on one covariate only: the predictions (which see all three) explain the residual.
    X1 = np.c_[np.ones(len(d["Y"])), d["X"][:, 1]]
    d = dict(d, X=X1, X_unlabeled=np.c_[np.ones(len(d["X_unlabeled"])), d["X_unlabeled"][:, 1]])
    element = _fit("ols", d, lam_mode="element")
    assert element.lam_.shape == (2,) and np.all((element.lam_ >= 0) & (element.lam_ <= 1))
    coord = _fit("ols", d, coord=1)
    overall = _fit("ols", d)
    assert isinstance(coord.lam_, float) and coord.lam_ != overall.lam_
    flip = make_bandit(5, adaptive=False)
    flip = dict(flip, pred_labeled=-flip["pred_labeled"], pred_unlabeled=-flip["pred_unlabeled"])
    assert _fit("mean", flip, clip_lam=False).lam_ < 0  # negated predictions are anti-informative
    assert _fit("mean", flip).lam_ == 0.0


def test_informative_predictions_tighten_and_useless_ones_get_lambda_near_zero(make_bandit):
    d = make_bandit(6, T=600, N=20000)
    ipw, tuned = _fit("mean", d, lam=0.0), _fit("mean", d)
    assert tuned.se_[0] < 0.8 * ipw.se_[0]
    # Under a non-adaptive policy useless predictions get λ̂ ≈ 0 (spec §6.4). Under an adaptive one
    # the −θ part of ψ^f is a control variate for the random weights (E ρ = 1), so λ̂ need not be 0.
    useless = make_bandit(6, T=2000, N=20000, signal=0.0, adaptive=False)
    assert abs(_fit("mean", useless, clip_lam=False).lam_) < 0.1


def test_sqrt_stabilized_equals_ipw_when_the_policy_is_the_stabilizer(make_bandit):
    d = make_bandit(7, T=2000, adaptive=False)
    ipw = _fit("mean", d, lam=0.5)
    sqrt = _fit("mean", d, lam=0.5, weighting="sqrt_stabilized")
    # w = ρ; only the unlabeled scale s = mean(ρ) = 1 + O(T^-1/2) differs.
    assert sqrt.theta_[0] == pytest.approx(ipw.theta_[0], abs=0.2 * ipw.se_[0])
    assert sqrt.se_[0] == pytest.approx(ipw.se_[0], rel=0.05)
    assert sqrt.theta_[0] != ipw.theta_[0]


def test_effect_and_policy_value(make_bandit):
    d = make_bandit(8)
    joint = _fit("mean", d, arm=[1, 0], lam=0.7)
    one = _fit("mean", d, arm=1, lam=0.7)
    zero = _fit("mean", d, arm=0, lam=0.7)
    np.testing.assert_allclose(joint.theta_, [one.theta_[0], zero.theta_[0]], rtol=1e-12)
    np.testing.assert_allclose(np.diag(joint.cov_), [one.cov_[0, 0], zero.cov_[0, 0]], rtol=1e-12)
    eff = joint.contrast([1, -1])
    # ppai_effect_ci tunes λ for the effect's own variance: the same as coord=[1, -1] on the joint fit.
    tuned = ppai.PPAI("mean", target_arm=[1, 0], coord=[1, -1]).fit(
        None, d["A"], d["Y"], d["propensity"], d["pred_labeled"], None, d["pred_unlabeled"]
    )
    effect = ppai.ppai_effect_ci(
        d["Y"],
        d["A"],
        d["propensity"],
        d["pred_labeled"],
        d["pred_unlabeled"],
        treatment=1,
        control=0,
    )
    assert effect == tuned.contrast([1, -1], alpha=0.1)
    assert tuned.lam_ != _fit("mean", d, arm=[1, 0]).lam_  # not the trace's λ
    with pytest.raises(ValueError, match="coord must be an index or 2 finite weights"):
        _fit("mean", d, arm=[1, 0], coord=[1, -1, 0])
    assert eff["estimate"] == pytest.approx(one.theta_[0] - zero.theta_[0])
    assert eff["se"] ** 2 == pytest.approx(
        joint.cov_[0, 0] + joint.cov_[1, 1] - 2 * joint.cov_[0, 1]
    )
    # The value of "always play arm 1" is the mean of arm 1.
    value = ppai.PPAI("mean", target_policy=[0.0, 1.0], lam=0.7).fit(
        None, d["A"], d["Y"], d["propensity"], d["pred_labeled"], None, d["pred_unlabeled"]
    )
    np.testing.assert_allclose(value.theta_, one.theta_, rtol=1e-12)
    mixed = ppai.ppai_policy_value_ci(
        d["Y"],
        d["A"],
        d["propensity"],
        d["pred_labeled"],
        d["pred_unlabeled"],
        target_policy=lambda X: np.where(X[:, :1] > 0, [0.0, 1.0], [1.0, 0.0]),
        X=d["X"],
        X_unlabeled=d["X_unlabeled"],
        lam=0.7,
    )
    assert mixed[0] < mixed[1]


def test_pvalues_and_intervals_agree(make_bandit):
    d = make_bandit(9)
    fit = _fit("mean", d)
    lo, hi = fit.conf_int(0.1)[0]
    assert fit.pvalue(lo)[0] == pytest.approx(0.1, rel=1e-9)
    assert fit.pvalue(hi, alternative="smaller")[0] == pytest.approx(0.05, rel=1e-9)
    lo1, hi1 = fit.conf_int(0.1, alternative="larger")[0]
    assert hi1 == np.inf and fit.pvalue(lo1, alternative="larger")[0] == pytest.approx(
        0.1, rel=1e-9
    )


def test_newton_reports_non_convergence():
    class NoRoot:
        name = "no-root"

        def dim(self, X):
            return 1

        def psi(self, theta, X, Y):
            return np.exp(theta[0]) * np.ones((len(Y), 1))  # never zero

        def jacobian(self, theta, X, Y, w):
            return np.array([[np.exp(theta[0]) * w.mean()]])

        def init(self, X, Y, w):
            return np.zeros(1)

    Y = np.ones(5)
    with pytest.raises(RuntimeError, match=r"no-root.*did not converge"):
        newton_solve(NoRoot(), [(None, Y, np.ones(5), np.ones(1))], np.zeros(1))


def test_functional_api_matches_the_estimator(make_bandit):
    d = make_bandit(10)
    X1 = np.c_[np.ones(len(d["Y"])), d["X"]]
    X1_u = np.c_[np.ones(len(d["X_unlabeled"])), d["X_unlabeled"]]
    args = (X1, d["Y"], d["A"], d["propensity"], d["pred_labeled"], X1_u, d["pred_unlabeled"])
    est = ppai.PPAI("ols", target_arm=1).fit(X1, d["A"], d["Y"], *args[3:])
    np.testing.assert_allclose(ppai.ppai_ols_pointestimate(*args, arm=1), est.theta_)
    np.testing.assert_allclose(np.c_[ppai.ppai_ols_ci(*args, arm=1)], est.conf_int(0.1))
    np.testing.assert_allclose(ppai.ppai_ols_pval(*args, arm=1, null=0.1), est.pvalue(0.1))
    Yb = (d["Y"] > 0.3).astype(float)
    fb, fb_u = (d["pred_labeled"] > 0.3) * 0.8 + 0.1, (d["pred_unlabeled"] > 0.3) * 0.8 + 0.1
    bargs = (X1, Yb, d["A"], d["propensity"], fb, X1_u, fb_u)
    lest = ppai.PPAI("logistic", target_arm=1).fit(X1, d["A"], Yb, d["propensity"], fb, X1_u, fb_u)
    np.testing.assert_allclose(ppai.ppai_logistic_pointestimate(*bargs, arm=1), lest.theta_)
    np.testing.assert_allclose(np.c_[ppai.ppai_logistic_ci(*bargs, arm=1)], lest.conf_int(0.1))
    np.testing.assert_allclose(ppai.ppai_logistic_pval(*bargs, arm=1), lest.pvalue())
    margs = (d["Y"], d["A"], d["propensity"], d["pred_labeled"], d["pred_unlabeled"])
    q = ppai.ppai_quantile_pointestimate(*margs, arm=1, q=0.5)
    lo, hi = ppai.ppai_quantile_ci(*margs, arm=1, q=0.5)
    assert lo < q < hi
    p = ppai.ppai_mean_pval(*margs, arm=1, null=ppai.ppai_mean_ci(*margs, arm=1, alpha=0.2)[0])
    assert p == pytest.approx(0.2, rel=1e-9)
    lo, hi = ppai.ppi_ignoring_adaptivity_ci(
        "mean", None, d["Y"], d["A"], d["pred_labeled"], None, d["pred_unlabeled"], arm=1
    )
    played = d["A"] == 1
    f1 = d["pred_labeled"][played, 1]
    # The naive baseline is PPI++ on the rounds that played the arm.
    lam = ppai.PPAI("mean", target_arm=0).fit(
        None,
        np.zeros(played.sum(), int),
        d["Y"][played],
        np.ones(played.sum()),
        f1,
        None,
        d["pred_unlabeled"][:, 1],
    )
    np.testing.assert_allclose(np.r_[lo, hi], lam.conf_int(0.1)[0], rtol=1e-12)


def test_perfect_predictions_pull_lambda_to_one_and_leave_only_the_pool_variance():
    """Spec §6.3: f = Y(a) exactly ⇒ λ̂ → 1 as N grows, and Var θ̂ → λ² Var_U(f̃) / N."""
    rng = np.random.default_rng(12)
    T, N = 400, 200_000
    means = np.array([0.0, 0.3])
    Y_all = rng.standard_normal((T, 2)) + means
    A = rng.integers(0, 2, T)
    P = np.where(A == 1, 0.3, 0.7)  # a fixed, non-uniform design
    Y = Y_all[np.arange(T), A]
    pool = rng.standard_normal((N, 2)) + means
    fit = ppai.PPAI("mean", target_arm=1).fit(None, A, Y, P, Y, None, pool)
    assert fit.lam_ > 0.95
    pool_only = fit.lam_ * pool[:, 1].std(ddof=1) / np.sqrt(N)
    assert fit.se_[0] == pytest.approx(pool_only, rel=0.1)


def test_labeled_contexts_join_the_pool(make_bandit):
    """Spec §2.2 option: the pool mean runs over the N unlabeled and the T labeled contexts."""
    d = make_bandit(13, N=300)
    T, N, lam = len(d["Y"]), len(d["pred_unlabeled"]), 0.6
    fit = _fit("mean", d, lam=lam, include_labeled_contexts=True)
    rho = (d["A"] == 1) / d["propensity"][:, 1]
    f = d["pred_labeled"][np.arange(T), d["A"]]
    pool = (d["pred_unlabeled"][:, 1].sum() + d["pred_labeled"][:, 1].sum()) / (N + T)
    expected = (lam * pool + (rho * (d["Y"] - lam * f)).mean()) / (lam + (1 - lam) * rho.mean())
    assert fit.theta_[0] == pytest.approx(expected, rel=1e-12)
    assert _fit("mean", d, lam=0.0, include_labeled_contexts=True).theta_[0] == pytest.approx(
        _fit("mean", d, lam=0.0).theta_[0], rel=1e-12
    )
    # Without any unlabeled pool this is AIPW on the labeled contexts (spec §8: N = 0 allowed).
    no_pool = dict(d, pred_unlabeled=d["pred_unlabeled"][:0], X_unlabeled=d["X_unlabeled"][:0])
    with pytest.warns(UserWarning, match="unlabeled pool is empty"):
        aipw = _fit("mean", no_pool, lam=1.0, include_labeled_contexts=True)
    m1 = d["pred_labeled"][:, 1]
    assert aipw.theta_[0] == pytest.approx(m1.mean() + (rho * (d["Y"] - f)).mean(), rel=1e-12)
    with pytest.warns(UserWarning, match="unlabeled pool is empty"):
        assert np.isfinite(_fit("mean", no_pool, include_labeled_contexts=True).se_[0])
    with pytest.raises(ValueError, match=r"needs pred_labeled as a \(T, K\) matrix"):
        _fit("mean", dict(d, pred_labeled=f), include_labeled_contexts=True)
    with pytest.raises(ValueError, match="include_labeled_contexts needs weighting='ipw'"):
        _fit("mean", d, include_labeled_contexts=True, weighting="sqrt_stabilized")


def _logistic_oracle(X, Y, f, w, X_u, f_u, lam):
    """Root of the logistic Ψ written out in numpy: scipy's hybrid solver, then exact Newton
    steps (a fresh Jacobian every step) until θ stops moving."""
    from scipy.optimize import root
    from scipy.special import expit

    T, N = len(Y), len(f_u)

    def psi(theta):
        p, p_u = expit(X @ theta), expit(X_u @ theta)
        return (X.T @ (w * (Y - p - lam * (f - p)))) / T + lam * (X_u.T @ (f_u - p_u)) / N

    def jac(theta):
        p, p_u = expit(X @ theta), expit(X_u @ theta)
        labeled = (X * ((1 - lam) * w * p * (1 - p))[:, None]).T @ X / T
        return -labeled - lam * (X_u * (p_u * (1 - p_u))[:, None]).T @ X_u / N

    theta = root(psi, np.zeros(X.shape[1]), jac=jac, method="hybr", options={"xtol": 1e-15}).x
    for _ in range(20):
        theta = theta - np.linalg.solve(jac(theta), psi(theta))
    return theta


@pytest.mark.parametrize("beta", [[0.2, 1.0, -0.7, 0.4], [0.5, 8.0, -6.0, 3.0]])
@pytest.mark.parametrize("lam", [0.0, 0.3, 0.5])
def test_logistic_solve_reaches_the_root_to_1e12(beta, lam):
    """The lean Newton keeps a Jacobian across steps; its last step is a true Newton step, so θ is
    the root to 1e-12 relative per coordinate on well-conditioned and near-separated data (before:
    up to 8e-9 on near-separated data, where the converging step used an old Jacobian)."""
    rng = np.random.default_rng(11)
    T, N, beta = 900, 3000, np.asarray(beta)
    X = np.c_[np.ones(T), rng.standard_normal((T, 3))]
    X_u = np.c_[np.ones(N), rng.standard_normal((N, 3))]
    mu, mu_u = 1 / (1 + np.exp(-X @ beta)), 1 / (1 + np.exp(-X_u @ beta))
    Y = (rng.random(T) < mu).astype(float)
    f = np.clip(mu + 0.15 * rng.standard_normal(T), 0, 1)
    f_u = np.clip(mu_u + 0.15 * rng.standard_normal(N), 0, 1)
    p1 = np.clip(0.1 + 0.8 / (1 + np.exp(-2 * X @ beta)), 0.05, 0.95)  # adaptive-ish logging
    w = (rng.random(T) < p1) / p1
    block = Block(X, Y, f, w, X_u, (f_u,), (np.ones(N),))
    theta = solve(ppai.problems.resolve_problem("logistic"), block, np.full(4, lam))
    oracle = _logistic_oracle(X, Y, f, w, X_u, f_u, lam)
    np.testing.assert_allclose(theta, oracle, rtol=1e-12, atol=0)
