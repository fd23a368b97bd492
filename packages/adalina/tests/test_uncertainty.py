"""Standard errors, their coverage on enumerated games, and the stopping rule."""

import warnings

import numpy as np
import pytest
from adalina import (
    AME,
    ARM,
    GELS,
    MSR,
    OFA,
    AbsoluteStandardError,
    Adalina,
    GELSShapley,
    KernelSHAPMV,
    KernelSHAPUnbiased,
    LinearApprox,
    MSRProb,
    PermutationSampling,
    ShapIQ,
    exact_semivalue,
)
from adalina_testgames import tabulated

N = 8


@pytest.fixture(scope="module")
def game():
    return tabulated(N, seed=1, offset=3.0)


def _coverage(make, game, sv, budget, seeds=150):
    truth = exact_semivalue(game, N, sv)
    hits = []
    for seed in range(seeds):
        result = make(seed).approximate(budget, game)
        hits.append(np.abs(result.values - truth) <= 1.96 * result.stderr)
    return float(np.mean(hits))


@pytest.mark.parametrize("sv", ["shapley", 0.3, (16, 1)])
@pytest.mark.parametrize("include_extremes", [False, True])
def test_adalina_95_percent_intervals_cover_the_exact_values(game, sv, include_extremes):
    def make(seed):
        return Adalina(N, sv, include_extremes=include_extremes, random_state=seed)

    # 150 seeds x 8 players; measured 0.937-0.951 (the delta-method term for the plug-in gamma
    # is O(1/sqrt(m)): 0.1's formula, which dropped it, covers the same here; the formula itself
    # is pinned by test_adaptive_stderr_is_the_delta_method_on_the_sample_vectors)
    assert _coverage(make, game, sv, 40 * N) >= 0.93


@pytest.mark.parametrize(
    ("make", "sv"),
    [
        (lambda s: LinearApprox(N, (4, 1), gamma="empty", random_state=s), (4, 1)),
        (lambda s: ShapIQ(N, 0.3, random_state=s), 0.3),
        (lambda s: MSRProb(N, "shapley", random_state=s), "shapley"),
        (lambda s: MSR(N, 0.5, random_state=s), 0.5),
        (lambda s: AME(N, (4, 1), random_state=s), (4, 1)),
        (lambda s: KernelSHAPUnbiased(N, random_state=s), "shapley"),
        (lambda s: PermutationSampling(N, random_state=s), "shapley"),
        (lambda s: OFA(N, (1, 4), random_state=s), (1, 4)),
        (lambda s: ARM(N, 0.3, random_state=s), 0.3),
        (lambda s: GELS(N, (4, 1), random_state=s), (4, 1)),
        (lambda s: GELSShapley(N, random_state=s), "shapley"),
        (lambda s: KernelSHAPMV(N, random_state=s), "shapley"),
    ],
)
def test_every_baseline_returns_standard_errors_that_cover(game, make, sv):
    assert make(0).approximate(40 * N, game).stderr.shape == (N,)
    assert _coverage(make, game, sv, 60 * N, seeds=60) >= 0.9


def test_stderr_shrinks_like_one_over_sqrt_m(game):
    small = Adalina(N, random_state=0).approximate(100 * N, game).stderr
    large = Adalina(N, random_state=0).approximate(1600 * N, game).stderr
    np.testing.assert_allclose(large / small, 0.25, rtol=0.15)


def test_the_stopping_rule_ends_approximate_early(game):
    rule = AbsoluteStandardError(threshold=0.05, burn_in=50)
    est = Adalina(N, stopping=rule, batch_size=20, random_state=0)
    result = est.approximate(100_000, game)
    assert result.converged and est.converged_
    assert result.n_queries < 100_000
    assert np.all(result.stderr <= 0.05)
    # one batch earlier, the rule did not hold yet
    early = Adalina(N, batch_size=20, random_state=0).approximate(result.n_queries - 20, game)
    assert np.max(early.stderr) > 0.05
    # never fires: the whole budget is spent
    assert not Adalina(N, stopping=AbsoluteStandardError(1e-9)).approximate(500, game).converged


def test_the_stopping_rule_in_streaming(game):
    est = Adalina(N, stopping=AbsoluteStandardError(0.05, fraction=0.5), random_state=0)
    est.partial_fit(est.initial_coalitions(), game(est.initial_coalitions()))
    rounds = 0
    while not est.converged_:
        masks = est.sample_coalitions(50)
        est.partial_fit(masks, game(masks))
        rounds += 1
    assert rounds < 500
    assert np.mean(est.stderr_ <= 0.05) >= 0.5


def test_the_default_burn_in_waits_until_the_intervals_cover(game):
    # 0.2.0's burn_in=30 let a loose threshold stop at m ~ 30 = 3.75 n, where 95 % intervals cover
    # only ~0.91; the default now waits for 20 n samples (coverage >= 0.94, README table)
    loose = AbsoluteStandardError(threshold=1e6)
    assert loose.min_samples(N) == 20 * N
    result = Adalina(N, stopping=loose, batch_size=10, random_state=0).approximate(10_000, game)
    assert result.converged and 20 * N <= result.n_draws - 2 < 20 * N + 10  # 2: U(∅), U([n])
    # an explicit small burn_in is honoured but warns where it stops
    early = AbsoluteStandardError(threshold=1e6, burn_in=30)
    est = Adalina(N, stopping=early, batch_size=10, random_state=0)
    with pytest.warns(UserWarning, match=r"stopped at \d+ samples, below 20 x n = 160"):
        result = est.approximate(10_000, game)
    assert 30 <= result.n_draws - 2 < 40
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning once the burn-in reaches 20 n
        AbsoluteStandardError(threshold=1e6, burn_in=20 * N)(np.zeros(N), 20 * N)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(threshold=0.0), "threshold must be > 0"),
        (dict(threshold=0.1, fraction=1.5), "fraction must lie in"),
        (dict(threshold=0.1, burn_in=1), "burn_in must be None or an int >= 2"),
    ],
)
def test_stopping_rule_checks_its_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        AbsoluteStandardError(**kwargs)


def test_stopping_must_be_callable(game):
    with pytest.raises(TypeError, match="stopping must be None or a rule"):
        Adalina(N, stopping=0.01).approximate(100, game)
