"""Bad input fails early, naming the argument and what was expected."""

import numpy as np
import ppai
import pytest


@pytest.fixture
def d(make_bandit):
    return make_bandit(0, T=200, N=500)


def fit(d, problem="mean", arm=1, **kw):
    # d holds exactly fit's keywords (ppai.sim.Experiments.rep).
    return ppai.PPAI(problem, target_arm=arm, **kw).fit(**d)


def test_propensities_outside_zero_one(d):
    chosen = d["propensity"][np.arange(len(d["A"])), d["A"]]
    for bad in (0.0, 1.5, -0.1):
        p = chosen.copy()
        p[7] = bad
        with pytest.raises(ValueError, match=r"propensities must lie in \(0, 1\].*round 7"):
            fit(dict(d, propensity=p))


def test_propensities_below_the_floor_warn_with_the_count(d):
    chosen = d["propensity"][np.arange(len(d["A"])), d["A"]].copy()
    chosen[:3] = 1e-4
    with pytest.warns(UserWarning, match="3 propensities are below the floor"):
        fit(dict(d, propensity=chosen))


def test_estimated_propensities_warn(d):
    with pytest.warns(UserWarning, match="assume the propensities are the known probabilities"):
        fit(d, estimated_propensities=True)


def test_propensity_matrix_rows_must_sum_to_one(d):
    P = d["propensity"].copy()
    P[4] = [0.5, 0.6]
    with pytest.raises(ValueError, match="row 4 sums to"):
        fit(dict(d, propensity=P))


def test_propensity_matrix_negative_entry_is_named(d):
    """A row like [−0.2, 1.2] sums to 1: the error names the negative entry, as a plain float."""
    P = d["propensity"].copy()
    P[4] = [-0.2, 1.2]
    with pytest.raises(ValueError, match=r"propensity\[4, 0\] = -0.2$"):
        fit(dict(d, propensity=P))


@pytest.mark.parametrize(
    "Y, dtype", [(lambda Y: Y + 1j, "complex128"), (lambda Y: Y.astype(str), "<U")]
)
def test_complex_or_string_outcomes_are_an_error(d, Y, dtype):
    with pytest.raises(TypeError, match=f"Y must be a real numeric array.*dtype {dtype}"):
        fit(dict(d, Y=Y(d["Y"])))


def test_mismatched_lengths(d):
    with pytest.raises(ValueError, match="Y has 200 rows, pred_labeled has 199"):
        fit(dict(d, pred_labeled=d["pred_labeled"][:-1]))
    with pytest.raises(ValueError, match="X_unlabeled has 499 rows but pred_unlabeled has 500"):
        fit(dict(d, X_unlabeled=d["X_unlabeled"][:-1]), problem="ols")


@pytest.mark.parametrize("key", ["Y", "pred_labeled", "pred_unlabeled", "propensity"])
def test_nan(d, key):
    bad = d[key].copy()
    bad.flat[3] = np.nan
    with pytest.raises(ValueError, match=f"{key} has 1 NaN"):
        fit(dict(d, **{key: bad}))


def test_arm_index_out_of_range(d):
    A = d["A"].copy()
    A[5] = 2
    with pytest.raises(ValueError, match=r"arm index out of range \[0, 2\): A\[5\] = 2"):
        fit(dict(d, A=A))
    with pytest.raises(ValueError, match="target arm 3 is out of range"):
        fit(d, arm=3)


def test_arm_never_played(d):
    T = len(d["Y"])
    with pytest.raises(ValueError, match="no labeled samples for arm 1"):
        fit(dict(d, A=np.zeros(T, int)))


def test_singular_jacobian_names_the_problem(d):
    X = np.c_[d["X"], d["X"][:, 0]]  # a duplicated column
    X_u = np.c_[d["X_unlabeled"], d["X_unlabeled"][:, 0]]
    with pytest.raises(ValueError, match=r"ols estimating equation is singular.*collinear"):
        fit(dict(d, X=X, X_unlabeled=X_u), problem="ols")
    with pytest.raises(ValueError, match="logistic estimating equation is singular"):
        Yb = (d["Y"] > 0).astype(float)
        fit(
            dict(
                d,
                X=X,
                X_unlabeled=X_u,
                Y=Yb,
                pred_labeled=(d["pred_labeled"] > 0) * 1.0,
                pred_unlabeled=(d["pred_unlabeled"] > 0) * 1.0,
            ),
            problem="logistic",
        )


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.5, 2.0])
def test_alpha_outside_zero_one(d, alpha):
    with pytest.raises(ValueError, match="alpha must lie in"):
        fit(d, alpha=alpha)
    est = fit(d)
    with pytest.raises(ValueError, match="alpha must lie in"):
        est.conf_int(alpha)


def test_parameters(d):
    with pytest.raises(ValueError, match=r"lam=1.5 lies outside \[0, 1\] while clip_lam=True"):
        fit(d, lam=1.5)
    assert fit(d, lam=1.5, clip_lam=False).lam_ == 1.5
    with pytest.raises(ValueError, match="exactly one of target_arm and target_policy"):
        ppai.PPAI("mean").fit(
            None, d["A"], d["Y"], d["propensity"], d["pred_labeled"], None, d["pred_unlabeled"]
        )
    with pytest.raises(ValueError, match="problem must be one of"):
        fit(d, problem="poisson")
    with pytest.raises(TypeError, match="is not a ZProblem"):
        fit(d, problem=object())
    with pytest.raises(ValueError, match="weighting must be one of"):
        fit(d, weighting="aipw")
    with pytest.raises(ValueError, match="binary outcomes"):
        fit(d, problem="logistic")
    empty = dict(d, pred_unlabeled=d["pred_unlabeled"][:0], X_unlabeled=d["X_unlabeled"][:0])
    with pytest.raises(ValueError, match="at least 2 unlabeled"):
        fit(empty, lam=0.5)
    with pytest.warns(UserWarning, match="labeled-only estimator"):  # spec §8: N = 0 allowed
        got = fit(empty)
    np.testing.assert_array_equal(got.se_, fit(empty, lam=0.0).se_)
    with pytest.raises(ValueError, match="only enough for one target arm"):
        fit(dict(d, pred_unlabeled=d["pred_unlabeled"][:, 1]), arm=[0, 1])
    with pytest.raises(RuntimeError, match="not fitted"):
        ppai.PPAI().conf_int()
    with pytest.raises(ValueError, match="q must lie in"):
        fit(d, problem="quantile", q=1.0)


def test_quantile_inversion_rejects_what_it_does_not_support(d):
    args = (d["Y"], d["A"], d["propensity"], d["pred_labeled"], d["pred_unlabeled"])
    with pytest.raises(ValueError, match="method must be 'wald' or 'inversion'"):
        ppai.ppai_quantile_ci(*args, arm=1, q=0.5, method="bootstrap")
    with pytest.raises(ValueError, match="supports one target arm with weighting 'ipw' or 'none'"):
        ppai.ppai_quantile_ci(*args, arm=1, q=0.5, method="inversion", weighting="sqrt_stabilized")


def test_issue_26_bad_inputs_name_the_value(d):
    """Issue 26 §6: each gets a clear error naming the value."""
    T = len(d["Y"])
    with pytest.raises(ValueError, match=r"outcomes that vary: every weighted Y equals 1\.0"):
        fit(dict(d, Y=np.ones(T)), problem="quantile")
    X = np.c_[np.ones(T), d["X"][:, 0]]
    X_u = np.c_[np.ones(len(d["X_unlabeled"])), d["X_unlabeled"][:, 0]]
    probs = 1 / (1 + np.exp(-d["pred_unlabeled"]))
    sep = dict(d, X=X, X_unlabeled=X_u, Y=(X[:, 1] > 0).astype(float), pred_unlabeled=probs)
    sep["pred_labeled"] = 1 / (1 + np.exp(-d["pred_labeled"]))
    with pytest.raises(RuntimeError, match="separated by the covariates"):
        fit(sep, problem="logistic", lam=0.0)
    Yb = (d["Y"] > d["Y"].mean()).astype(float)
    with pytest.raises(ValueError, match=r"probabilities in \[0, 1\]; pred_labeled\[0, 0\] = "):
        fit(dict(d, Y=Yb, pred_labeled=d["pred_labeled"] + 3.0), problem="logistic")
    with pytest.raises(ValueError, match=r"pred_unlabeled\[4, 1\] = -0.5"):
        soft = probs.copy()
        soft[4, 1] = -0.5
        fit(
            dict(d, Y=Yb, pred_labeled=np.clip(d["pred_labeled"], 0, 1), pred_unlabeled=soft),
            problem="logistic",
        )
    for floor in (-1, 1.0, "0.1"):
        with pytest.raises(ValueError, match="propensity_floor must lie in"):
            fit(d, propensity_floor=floor)
    chosen = d["propensity"][np.arange(T), d["A"]].copy()
    chosen[3] = 1.2
    with pytest.raises(
        ValueError, match=r"round 3 \(propensity 1.2\): a probability cannot exceed 1"
    ):
        fit(dict(d, propensity=chosen))
    chosen[3] = 0.0
    with pytest.raises(ValueError, match="cannot have propensity 0 or less"):
        fit(dict(d, propensity=chosen))


def test_vector_pool_predictions_serve_only_their_arm(d):
    """A (N,) pool vector is one arm's predictions: a policy needing other arms is told so."""
    with pytest.raises(ValueError, match="only enough for one target arm"):
        ppai.PPAI("mean", target_policy=[0.5, 0.5]).fit(
            None,
            d["A"],
            d["Y"],
            d["propensity"],
            d["pred_labeled"],
            None,
            d["pred_unlabeled"][:, 1],
        )
    vec = fit(dict(d, pred_unlabeled=d["pred_unlabeled"][:, 1]))
    np.testing.assert_allclose(vec.theta_, fit(d).theta_, rtol=1e-13)
