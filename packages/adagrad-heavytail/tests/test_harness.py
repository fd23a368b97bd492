"""The rate harness: slopes on problems with known answers, bootstrap, joblib, verdicts."""

import numpy as np
import pytest
from adagrad_heavytail import experiments as E
from adagrad_heavytail import lower_bound as LB
from adagrad_heavytail import problems as P
from adagrad_heavytail.noise import Gaussian, SymmetricStable

TS = tuple(2 ** np.arange(6, 12))


def test_log_log_slope_is_exact_on_a_power_law():
    Ts = [10, 100, 1000]
    assert E.log_log_slope(Ts, 3.0 * np.asarray(Ts, float) ** -0.4) == pytest.approx(-0.4)


def test_seeded_gaussian_sweep_gives_adagrad_slope_near_minus_one_quarter():
    r = E.rate_sweep(
        "adagrad", P.BoundedNonconvex(10), Gaussian(), Ts=TS, seeds=16, fit_last=6, bootstrap=200
    )
    assert -0.30 <= r.slope <= -0.20
    assert r.ci[0] < r.slope < r.ci[1]
    assert r.params[0] == {"lr": 0.5, "eps": 0.0}  # sqrt(Δ/(dL)) = sqrt(5/20)
    assert [row["T"] for row in r.table] == list(TS)
    assert {"mean", "median", "q10", "q90", "diverged"} <= set(r.table[0])
    verdict = E.compare_to_theory(r, "adagrad", 2.0)
    assert verdict.bound == 0.25 and verdict.held


def test_a_frozen_method_fails_the_convergence_check():
    # negative control: a vanishing step size makes the slope 0 and the verdict not held
    r = E.rate_sweep(
        "sgd",
        P.BoundedNonconvex(4),
        Gaussian(),
        Ts=TS[:4],
        seeds=8,
        fit_last=4,
        bootstrap=100,
        params={"lr": 1e-9},
    )
    assert abs(r.slope) < 1e-3
    assert not E.compare_to_theory(r, "adagrad", 2.0).held


def test_n_jobs_two_gives_the_numbers_of_n_jobs_one():
    kw = dict(Ts=TS[:4], seeds=8, fit_last=4, bootstrap=50)
    a = E.rate_sweep("adagrad_norm", P.Quadratic(3), SymmetricStable(1.5), n_jobs=1, **kw)
    b = E.rate_sweep("adagrad_norm", P.Quadratic(3), SymmetricStable(1.5), n_jobs=2, **kw)
    np.testing.assert_array_equal(a.values, b.values)
    assert a.slope == b.slope and a.ci == b.ci


def test_median_statistic_and_other_metrics_run():
    kw = dict(Ts=TS[:3], seeds=8, fit_last=3, bootstrap=20)
    for metric in E.METRICS:
        r = E.rate_sweep(
            "nsgdm", P.Quadratic(2), Gaussian(), metric=metric, statistic="median", **kw
        )
        assert np.isfinite(r.slope)
    r = E.rate_sweep("clipped_sgd", P.Quadratic(2), Gaussian(), p=1.5, **kw)
    assert "clip" in r.params[0]


def test_divergence_is_reported_as_inf_not_nan():
    r = E.rate_sweep(
        "sgd",
        P.Quadratic(2, L=1.0),
        Gaussian(),
        Ts=TS[:3],
        seeds=8,
        fit_last=3,
        bootstrap=10,
        params={"lr": 50.0},
    )
    assert all(row["diverged"] == 1.0 for row in r.table[1:])


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(Ts=[64, 128]), "3 distinct"),
        (dict(Ts=[64, 64, 128, 128]), "3 distinct"),
        (dict(seeds=7), "8 seeds"),
        (dict(metric="loss"), "metric"),
        (dict(fit_last=2), "fit_last"),
        (dict(statistic="mode"), "statistic"),
    ],
)
def test_bad_sweeps(kw, match):
    args = dict(Ts=TS[:3], seeds=8, fit_last=3)
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        E.rate_sweep("adagrad", P.Quadratic(2), Gaussian(), **args)


def test_bad_method_parameters():
    with pytest.raises(ValueError, match="unknown method"):
        E.rate_sweep("adam", P.Quadratic(2), Gaussian(), Ts=TS[:3], seeds=8, fit_last=3)
    with pytest.raises(ValueError, match="unexpected"):
        E.rate_sweep(
            "sgd", P.Quadratic(2), Gaussian(), Ts=TS[:3], seeds=8, fit_last=3, params={"eps": 1}
        )


def test_ramp_hitting_time_matches_the_closed_form():
    for gamma in (0.5, 0.7):
        inst = LB.ramp_instance(gamma, L=1.0, Delta=50.0, eps=0.5)
        t = LB.hitting_time("adagrad", inst, 100_000)[0]
        # (Δ/(2γε))² = 10⁴ and 5102; the discrete sum's offset adds about 1.5/√T
        assert t == pytest.approx(inst.predicted_hitting_time(), rel=0.035)
    assert inst.value(np.array([[0.0]]))[0] == pytest.approx(50.0)
    assert inst.value(np.array([[1e3]]))[0] == pytest.approx(-0.5 * 0.5 / 2, abs=1e-9)


def test_ramp_value_and_gradient_agree():
    inst = LB.ramp_instance(1.0, L=2.0, Delta=3.0, eps=0.5)
    xs = np.linspace(-1, inst.D + 1, 301)[:, None]
    h = 1e-6
    fd = (inst.value(xs + h) - inst.value(xs - h)) / (2 * h)
    np.testing.assert_allclose(fd, inst.grad(xs)[:, 0], atol=1e-5)


def test_overshoot_hitting_time_grows_as_gamma_squared():
    gammas = np.array([2.0, 4.0, 8.0])
    times = [
        LB.hitting_time("adagrad", LB.overshoot_instance(g, 1.0, 0.1), 10**6)[0] for g in gammas
    ]
    slope = np.polyfit(np.log(gammas), np.log(times), 1)[0]
    assert 1.7 < slope < 2.3


def test_spike_oracle_and_noisy_hitting_time():
    spikes = LB.spike_oracle(sigma=0.5, p=1.5, q=1e-3)
    assert spikes.pth_moment(1.5) == pytest.approx(0.5**1.5)
    inst = LB.ramp_instance(0.5, 1.0, 5.0, 0.5)
    clean = LB.hitting_time("adagrad", inst, 5000, seeds=16)
    noisy = LB.hitting_time("adagrad", inst, 5000, seeds=16, noise=spikes, seed=1)
    assert np.all(clean == clean[0])
    assert np.median(noisy) >= clean[0]  # a spike only ever slows AdaGrad down on the ramp


def test_bad_lower_bound_input():
    with pytest.raises(ValueError, match="gamma"):
        LB.ramp_instance(0.0, 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="T must"):
        LB.hitting_time("adagrad", LB.ramp_instance(1.0, 1.0, 1.0, 1.0), 0)
