"""Spec oracle: the empirical distribution of every rejection style matches P(· | L); GCD does not."""

import numpy as np
import pytest
from cars_sampling import CARSSampler, empirical, exact_distribution, gcd_sample

scipy_stats = pytest.importorskip("scipy.stats")

N = 2000


def chi_square_pvalue(samples, exact):
    """Chi-square goodness of fit, rare strings pooled so every expected count is >= 5."""
    counts = empirical(samples)
    keys = sorted(exact.probs, key=exact.probs.get, reverse=True)
    obs, exp, pool_o, pool_e = [], [], 0.0, 0.0
    for k in keys:
        e = exact.probs[k] * len(samples)
        o = counts.get(k, 0.0) * len(samples)
        if e >= 5:
            obs.append(o)
            exp.append(e)
        else:
            pool_o += o
            pool_e += e
    if pool_e > 0:
        obs.append(pool_o)
        exp.append(pool_e)
    outside = sum(v for k, v in counts.items() if k not in exact.probs)
    assert outside == 0, "a sample outside the language was accepted"
    return scipy_stats.chisquare(obs, np.array(exp) * sum(obs) / sum(exp)).pvalue


@pytest.mark.parametrize("style", ["cars", "ars", "rsft", "rs"])
def test_rejection_styles_pass_chi_square(toy, style):
    lm, c, n = toy
    exact = exact_distribution(lm, c, max_new_tokens=n)
    sampler = CARSSampler(lm, c, style=style, max_new_tokens=n, seed=11)
    res = sampler.sample(n_samples=N, max_attempts=200_000)
    assert res.n_valid == N
    assert chi_square_pvalue(res.token_ids, exact) > 1e-3


def test_gcd_fails_chi_square_negative_control(toy):
    lm, c, n = toy
    exact = exact_distribution(lm, c, max_new_tokens=n)
    res = gcd_sample(lm, c, n_samples=N, max_new_tokens=n, seed=11)
    assert res.n_valid == N
    assert chi_square_pvalue(res.token_ids, exact) < 1e-6
