"""sample_with: one entry point that runs exactly what the sampler or GCD would."""

import pytest
from cars_sampling import CARSSampler, gcd_sample, sample_with


@pytest.mark.parametrize("method", ["cars", "rs"])
def test_sample_with_runs_the_sampler_style(toy, method):
    lm, c, n = toy
    got = sample_with(method, lm, c, n_samples=15, max_attempts=500, max_new_tokens=n, seed=4)
    want = CARSSampler(lm, c, style=method, max_new_tokens=n, seed=4).sample(
        n_samples=15, max_attempts=500
    )
    assert got.token_ids == want.token_ids and got.n_attempts == want.n_attempts


def test_sample_with_runs_gcd(toy):
    lm, c, n = toy
    got = sample_with("gcd", lm, c, n_samples=15, max_new_tokens=n, seed=4)
    assert got.token_ids == gcd_sample(lm, c, n_samples=15, max_new_tokens=n, seed=4).token_ids


def test_sample_with_refuses_unknown_methods(toy):
    lm, c, n = toy
    with pytest.raises(ValueError, match="'mcmc'"):
        sample_with("mcmc", lm, c, max_new_tokens=n)
