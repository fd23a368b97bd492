"""The rate window of the reproduction: the second-half average and the horizons around T_tune."""

from pathlib import Path

import numpy as np
from adagrad_heavytail import experiments as E
from adagrad_heavytail import problems as P
from adagrad_heavytail import reproduce as R
from adagrad_heavytail.noise import Gaussian
from adagrad_heavytail.problems import NoisyOracle

from shared_core.cli import ReproduceArgs


def _run(T: int) -> dict[str, np.ndarray]:
    oracle = NoisyOracle(P.BoundedNonconvex(4), Gaussian())
    params = {"lr": 0.1, "eps": 0.0}  # T-independent, so a run of T/2 steps is a prefix of T's
    return E.run_horizon("adagrad", oracle, T, 8, params, np.random.default_rng(3))


def test_tail_average_is_the_mean_over_the_second_half():
    # T/2 = 512 is a multiple of the noise chunk, so the T/2 run draws the T run's first half:
    # the second half's sum is the difference of the two full sums
    full, half = _run(1024), _run(512)
    second = (1024 * full["avg_grad_norm_l2"] - 512 * half["avg_grad_norm_l2"]) / 512
    np.testing.assert_allclose(full["tail_avg_grad_norm_l2"], second, rtol=1e-10)
    assert np.all(full["tail_avg_grad_norm_l2"] <= 2 * full["avg_grad_norm_l2"] + 1e-12)
    assert E.tail_start_step(1024) == 512 and E.tail_start_step(1) == 0


def test_tail_average_drops_the_first_descent():
    # from x₁ = 1 (‖∇f‖ ≈ 1 on d = 4) the descent to the floor takes ~200 steps at lr 0.1: in a run
    # of 512 the full average keeps it (0.36 over the seeds), the second half does not (0.14)
    out = _run(512)
    assert np.all(out["tail_avg_grad_norm_l2"] < 0.6 * out["avg_grad_norm_l2"])


def test_rate_window_is_centred_on_the_tuning_horizon():
    assert R.rate_horizons(2**14) == [2**13, 2**14, 2**15]
    assert R.RATE_METRIC == "tail_avg_grad_norm_l2" and R.RATE_METRIC in E.METRICS
    for size, T in (("smoke", 2**7), ("quick", 2**14)):
        args = ReproduceArgs(out=Path("."), size=size, seed=0)
        Ts = R.rate_horizons(R._tune_horizon(args))
        assert Ts[0] == T // 2 and Ts[1] == T and Ts[-1] == 2 * T  # the window brackets T_tune
