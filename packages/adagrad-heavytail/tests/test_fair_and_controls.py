"""Review fixes: the two-sided rate band, equal tuning on disjoint seeds, the controls."""

import dataclasses
import math

import numpy as np
import pytest
from adagrad_heavytail import experiments as E
from adagrad_heavytail import lower_bound as LB
from adagrad_heavytail import problems as P
from adagrad_heavytail.methods import stepper
from adagrad_heavytail.noise import Gaussian
from adagrad_heavytail.problems import NoisyOracle
from adagrad_heavytail.schedules import theory_params


def _result(slope: float, half_width: float = 0.01) -> E.RateResult:
    return E.RateResult(
        "adagrad",
        "avg_grad_norm_l2",
        "mean",
        [1, 2, 3],
        np.ones((3, 8)),
        slope,
        (slope - half_width, slope + half_width),
        3,
        [],
        [],
    )


def test_a_schedule_decaying_too_fast_fails_the_two_sided_check():
    # the reviewer's mutant γ/(√v)^1.3 measured -0.355 at p = 2 and passed the one-sided check
    mutant = E.compare_to_theory(_result(-0.355), "adagrad", 2.0)
    assert not mutant.held and mutant.too_fast and not mutant.too_slow
    assert E.compare_to_theory(_result(-0.355), "adagrad", 2.0, two_sided=False).held
    assert E.compare_to_theory(_result(-0.25), "adagrad", 2.0).held
    slow = E.compare_to_theory(_result(0.057), "adagrad", 2.0)  # λ = 1e4: a step that never moves
    assert slow.too_slow and not slow.held


def test_band_is_bound_to_minimax_plus_tolerance():
    # p = 1.5: AdaGrad's bound 1/12, minimax 1/5
    bound, ceiling = E.theory_band("adagrad", 1.5)
    assert bound == pytest.approx(1 / 12) and ceiling == pytest.approx(0.2)
    assert E.band_margin(0.2, "adagrad", 1.5) == pytest.approx(0.05)
    assert E.band_margin(0.3, "adagrad", 1.5) == pytest.approx(-0.05)
    assert E.band_margin(0.0, "adagrad", 1.5) == pytest.approx(0.05 - 1 / 12)  # too slow
    v = E.compare_to_theory(_result(-0.21, half_width=0.1), "adagrad", 1.5)
    assert v.held and not v.ci_held  # the interval reaches past the ceiling
    with pytest.raises(ValueError, match="tolerance"):
        E.theory_band("adagrad", 2.0, -0.1)


def test_the_mutant_control_runs_steps_decaying_faster():
    g = np.array([[1.0]])
    x, v = np.zeros((1, 1)), np.zeros((1, 1))
    faithful, mutant = (
        stepper("adagrad", {"lr": 1.0, "eps": 0.0}),
        stepper("adagrad", {"lr": 1.0, "eps": 0.0, "power": 1.3}),
    )
    xf, vf, xm, vm = x, v, x, v
    for _ in range(99):
        xf, vf = faithful.step(xf, g, vf)
        xm, vm = mutant.step(xm, g, vm)
    # the 100th step: 1/√100 against 1/100^0.65
    assert (faithful.step(xf, g, vf)[0] - xf)[0, 0] == pytest.approx(-0.1)
    assert (mutant.step(xm, g, vm)[0] - xm)[0, 0] == pytest.approx(-(100**-0.65))
    with pytest.raises(ValueError, match="power"):
        stepper("adagrad", {"lr": 1.0, "eps": 0.0, "power": 0.0})
    with pytest.raises(ValueError, match="unexpected"):
        stepper("adagrad_norm", {"lr": 1.0, "eps": 0.0, "power": 1.3})


def test_tuning_scores_each_multiplier_like_a_run_at_that_step():
    # noise of scale 1e-12: every seed is the deterministic run, so the vectorised tuner's scores
    # must equal separate runs at lr x m
    prob, law = P.Quadratic(3, L=1.0), Gaussian(1e-12)
    t = E.tune_step("sgd", prob, law, 64, seeds=8)
    oracle = NoisyOracle(prob, law)
    base = theory_params("sgd", 64, L=prob.L, Delta=prob.Delta, sigma=oracle.vector_scale(), d=3)
    for m, score in zip(t.grid, t.scores, strict=True):
        run = E.run_horizon("sgd", oracle, 64, 8, {"lr": base["lr"] * m}, np.random.default_rng(0))[
            "avg_grad_norm_l2"
        ]
        assert score == pytest.approx(run.mean(), rel=1e-9)
    assert set(E.TUNING_GRID) <= set(t.grid) and t.multiplier == t.grid[int(np.argmin(t.scores))]
    assert list(t.grid) == sorted(t.grid)


#: the best multiplier of each method's default step on the quadratic, noise 1e-3, T = 64 (a wide
#: grid 4^-6..4^6 measured it: every neighbour at x4 and /4 scores at least 1.5x worse)
_BEST = {"sgd": 1.0, "adagrad": 1.0, "adagrad_norm": 1.0, "clipped_sgd": 64.0, "nsgdm": 4.0}


@pytest.mark.parametrize("method", sorted(_BEST))
def test_tuning_extends_past_an_edge_until_it_brackets_the_best_step(method):
    # the same rule for every method: a grid whose best is outside it, below or above
    prob, law, best = P.Quadratic(3, L=1.0), Gaussian(1e-3), _BEST[method]
    above = E.tune_step(method, prob, law, 64, seeds=8, grid=(4 * best, 16 * best, 64 * best))
    assert above.multiplier == best and above.interior and above.extensions == 2
    assert above.grid == (best / 4, best, 4 * best, 16 * best, 64 * best)
    below = E.tune_step(method, prob, law, 64, seeds=8, grid=(best / 64, best / 16, best / 4))
    assert below.multiplier == best and below.interior and below.extensions == 2
    # two extensions are the budget: one grid further away ends at the edge, flagged not interior
    far = E.tune_step(method, prob, law, 64, seeds=8, grid=(16 * best, 64 * best, 256 * best))
    assert far.multiplier == best and not far.interior and far.extensions == 2
    none = E.tune_step(method, prob, law, 64, seeds=8, grid=(4 * best,), extensions=0)
    assert none.grid == (4 * best,) and not none.interior and none.extensions == 0


def test_tuning_picks_the_larger_step_when_the_default_crawls_and_never_a_diverging_one():
    prob, law = P.Quadratic(3, L=1.0), Gaussian(0.1)
    crawl = E.tune_step("nsgdm", prob, law, 256, seeds=8)
    assert crawl.multiplier > 1  # NSGD-M's sqrt(Δ/L)·T^{-3/4} crawls at T = 256
    assert crawl.scores[0] > 2 * min(crawl.scores)
    wild = E.tune_step("sgd", prob, law, 256, seeds=8, grid=(1.0, 1e3), extensions=0)
    assert wild.multiplier == 1.0 and math.isinf(wild.scores[1])  # lr 1e3 diverges


def test_tuning_streams_are_disjoint_from_the_sweep_streams():
    prob, law = P.BoundedNonconvex(4), Gaussian()
    T = 128
    tuned = E.tune_step("adagrad", prob, law, T, seeds=8, grid=(1.0,), extensions=0)
    sweep = E.rate_sweep("adagrad", prob, law, Ts=[32, 64, T], seeds=8, fit_last=3, bootstrap=0)
    # same method, step, T and seed count: only the noise streams differ
    assert tuned.scores[0] != pytest.approx(sweep.values[-1].mean(), rel=1e-12)
    scaled = E.rate_sweep(
        "adagrad", prob, law, Ts=[32, 64, T], seeds=8, fit_last=3, bootstrap=0, lr_scale=4.0
    )
    assert scaled.params[0]["lr"] == pytest.approx(4 * sweep.params[0]["lr"])
    with pytest.raises(ValueError, match="lr_scale"):
        E.rate_sweep("adagrad", prob, law, Ts=[32, 64, T], seeds=8, fit_last=3, lr_scale=0.0)
    with pytest.raises(ValueError, match="grid"):
        E.tune_step("adagrad", prob, law, T, seeds=8, grid=(0.0,))
    with pytest.raises(ValueError, match="extensions"):
        E.tune_step("adagrad", prob, law, T, seeds=8, extensions=-1)


def test_spikes_slow_adagrad_but_not_clipped_sgd():
    # the spike claim and its control at a small scale: AdaGrad's hitting time grows when the same
    # σ comes as rare large spikes; clipped SGD, which forgets a spike, is not slowed
    from adagrad_heavytail.reproduce import SPIKE_METHODS, _log_median_ratio

    inst = LB.ramp_instance(0.5, 1.0, 10.0, 0.5)  # clean 400 steps
    ratio = {}
    for method, params in SPIKE_METHODS.items():
        clip = dict(params, lr=params["lr"] * 2500 / 400) if method == "clipped_sgd" else params
        times = [
            LB.hitting_time(
                method, inst, 20_000, 32, noise=LB.spike_oracle(0.5, 1.5, q), params=clip, seed=3
            )
            for q in (1e-2, 1.0)
        ]
        ratio[method] = _log_median_ratio(*times, seed=0)
    assert ratio["adagrad"][0] > math.log(1.25)  # measured 1.51x (32 seeds, s.e. of the log 0.17)
    assert abs(ratio["clipped_sgd"][0]) < math.log(1.1)


def test_verdict_is_a_frozen_dataclass_with_the_band():
    v = E.compare_to_theory(_result(-0.25), "adagrad", 2.0)
    assert {f.name for f in dataclasses.fields(v)} >= {"ceiling", "too_fast", "too_slow"}
    assert v.ceiling == pytest.approx(0.25)


def test_final_value_metric_is_f_at_the_last_iterate():
    prob, law = P.Quadratic(3, L=1.0), Gaussian(1e-12)
    oracle = NoisyOracle(prob, law)
    out = E.run_horizon("sgd", oracle, 1, 8, {"lr": 0.5}, np.random.default_rng(0))
    x1 = prob.x0 - 0.5 * prob.grad(prob.x0)  # one step of SGD, noise 1e-12
    np.testing.assert_allclose(out["final_value"], prob.value(x1), rtol=1e-9)


def test_gradient_norm_tuning_rewards_escaping_where_f_is_flat_and_final_value_does_not():
    # Σu²/(1+u²) has ∇f → 0 as |u| → ∞: under t(1.5) noise the largest step throws the iterate out
    # there and scores the smallest (1/T)Σ‖∇f‖, while f(x_T) there is near its sup d = 2
    from adagrad_heavytail.noise import StudentT

    prob, law, grid = P.BoundedNonconvex(2), StudentT(1.5), (0.25, 1.0, 4.0, 16.0, 64.0, 256.0)
    for method in ("sgd", "adagrad"):
        kw = dict(seeds=16, grid=grid, extensions=0)
        gamed = E.tune_step(method, prob, law, 1024, metric="avg_grad_norm_l2", **kw)
        assert gamed.multiplier == 256.0
        fair = E.tune_step(method, prob, law, 1024, metric="final_value", **kw)
        assert fair.multiplier <= 1.0 and fair.scores[-1] > 0.9 * prob.d
