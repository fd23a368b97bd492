"""The test that catches the classic bug: the first sample of many fresh samplers, by chi-square.

Learning makes later samples of one sampler nearly immune to a wrong proposal at new nodes (few
nodes are new), so a long run from one sampler cannot tell the bug apart; the first sample, where
every node below the root is new, can.
"""

import numpy as np
import pytest
from cars_sampling import CARSSampler, empirical, exact_distribution, total_variation

N_FRESH = 3000


def first_samples(cls, lm, c, n, style="cars"):
    """One sample per fresh trie: ``reset()`` drops the trie, the random stream goes on."""
    sampler, out = cls(lm, c, style=style, max_new_tokens=n, seed=0), []
    for _ in range(N_FRESH):
        sampler.reset()
        res = sampler.sample(max_attempts=10_000)
        assert res.n_valid == 1 and sampler.stats.accepted == 1
        out.append(res.token_ids[0])
    return out


def test_first_sample_of_fresh_cars_samplers_is_exact(toy, chi_square):
    lm, c, n = toy
    exact = exact_distribution(lm, c, max_new_tokens=n)
    samples = first_samples(CARSSampler, lm, c, n)
    assert chi_square(samples, exact) > 1e-3
    assert total_variation(empirical(samples), exact.probs) < 0.05


def test_the_cone_masked_mutant_fails_it(toy, cone_mutant, chi_square):
    lm, c, n = toy
    exact = exact_distribution(lm, c, max_new_tokens=n)
    samples = first_samples(cone_mutant, lm, c, n)
    assert chi_square(samples, exact) < 1e-6
    assert total_variation(empirical(samples), exact.probs) > 0.15


@pytest.mark.slow
@pytest.mark.parametrize("style", ["ars", "rsft"])
def test_first_samples_of_the_other_learning_styles_are_exact(toy, style, chi_square):
    lm, c, n = toy
    exact = exact_distribution(lm, c, max_new_tokens=n)
    samples = first_samples(CARSSampler, lm, c, n, style=style)
    assert chi_square(samples, exact) > 1e-3
    assert np.isfinite(total_variation(empirical(samples), exact.probs))
