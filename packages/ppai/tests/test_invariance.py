"""Invariances: relabelling arms, rescaling and shifting Y, permuting rows."""

import numpy as np
import ppai
import pytest


def fit(d, problem="mean", arm=1, **kw):
    # d holds exactly fit's keywords (ppai.sim.Experiments.rep).
    return ppai.PPAI(problem, target_arm=arm, **kw).fit(**d)


@pytest.mark.parametrize("problem", ["mean", "ols", "quantile"])
def test_relabelling_arms(make_bandit, problem):
    d = make_bandit(0)
    swapped = dict(
        d,
        A=1 - d["A"],
        propensity=d["propensity"][:, ::-1],
        pred_labeled=d["pred_labeled"][:, ::-1],
        pred_unlabeled=d["pred_unlabeled"][:, ::-1],
    )
    a, b = fit(d, problem, arm=1), fit(swapped, problem, arm=0)
    np.testing.assert_allclose(b.theta_, a.theta_, rtol=1e-12)
    np.testing.assert_allclose(b.cov_, a.cov_, rtol=1e-10)
    assert b.lam_ == pytest.approx(a.lam_, rel=1e-10)


@pytest.mark.parametrize("problem", ["mean", "ols"])
@pytest.mark.parametrize("c", [3.0, -0.5])
def test_rescaling_y_and_predictions(make_bandit, problem, c):
    d = make_bandit(1)
    scaled = dict(
        d, Y=c * d["Y"], pred_labeled=c * d["pred_labeled"], pred_unlabeled=c * d["pred_unlabeled"]
    )
    a, b = fit(d, problem), fit(scaled, problem)
    np.testing.assert_allclose(b.theta_, c * a.theta_, rtol=1e-10)
    np.testing.assert_allclose(b.se_, abs(c) * a.se_, rtol=1e-10)
    assert b.lam_ == pytest.approx(a.lam_, rel=1e-10)
    ci_a, ci_b = a.conf_int(), b.conf_int()
    np.testing.assert_allclose(np.sort(ci_b, axis=1), np.sort(c * ci_a, axis=1), rtol=1e-10)


def test_shifting_y_and_predictions_shifts_the_mean(make_bandit):
    d = make_bandit(2)
    shifted = dict(
        d,
        Y=d["Y"] + 10,
        pred_labeled=d["pred_labeled"] + 10,
        pred_unlabeled=d["pred_unlabeled"] + 10,
    )
    a, b = fit(d, lam=0.6), fit(shifted, lam=0.6)
    assert b.theta_[0] == pytest.approx(a.theta_[0] + 10, rel=1e-12)


@pytest.mark.parametrize("problem", ["mean", "ols", "quantile"])
def test_permuting_rows(make_bandit, problem):
    d = make_bandit(3)
    rng = np.random.default_rng(0)
    u = rng.permutation(len(d["X_unlabeled"]))
    t = rng.permutation(len(d["Y"]))
    perm = dict(
        X=d["X"][t],
        A=d["A"][t],
        Y=d["Y"][t],
        propensity=d["propensity"][t],
        pred_labeled=d["pred_labeled"][t],
        X_unlabeled=d["X_unlabeled"][u],
        pred_unlabeled=d["pred_unlabeled"][u],
    )
    a, b = fit(d, problem), fit(perm, problem)
    np.testing.assert_allclose(b.theta_, a.theta_, rtol=1e-10)
    np.testing.assert_allclose(b.cov_, a.cov_, rtol=1e-8)
