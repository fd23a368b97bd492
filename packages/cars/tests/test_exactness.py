"""Spec oracle: the empirical distribution of every rejection style matches P(· | L); GCD does not."""

import pytest
from cars_sampling import CARSSampler, exact_distribution, gcd_sample

pytest.importorskip("scipy.stats")

N = 2000


@pytest.mark.parametrize("style", ["cars", "ars", "rsft", "rs"])
def test_rejection_styles_pass_chi_square(toy, style, chi_square):
    lm, c, n = toy
    exact = exact_distribution(lm, c, max_new_tokens=n)
    sampler = CARSSampler(lm, c, style=style, max_new_tokens=n, seed=11)
    res = sampler.sample(n_samples=N, max_attempts=200_000)
    assert res.n_valid == N
    assert chi_square(res.token_ids, exact) > 1e-3


def test_gcd_fails_chi_square_negative_control(toy, chi_square):
    lm, c, n = toy
    exact = exact_distribution(lm, c, max_new_tokens=n)
    res = gcd_sample(lm, c, n_samples=N, max_new_tokens=n, seed=11)
    assert res.n_valid == N
    assert chi_square(res.token_ids, exact) < 1e-6
