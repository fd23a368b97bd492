"""``budget="draws"`` (the paper's count) and ``budget="evaluations"`` (shapiq's count)."""

import warnings

import numpy as np
import pytest
from adalina import Adalina, PermutationSampling, ShapIQ
from adalina_testgames import tabulated

N = 8


@pytest.fixture(scope="module")
def game():
    return tabulated(N, seed=2, offset=1.0)


class Counting:
    """Records every row the estimator asks for."""

    def __init__(self, inner):
        self.inner, self.rows, self.keys = inner, 0, []

    def __call__(self, masks):
        self.rows += masks.shape[0]
        self.keys += [bytes(r) for r in np.packbits(masks, axis=1)]
        return self.inner(masks)


@pytest.mark.parametrize("make", [Adalina, ShapIQ, PermutationSampling])
def test_evaluations_are_distinct_and_exactly_the_budget(game, make):
    counting = Counting(game)
    result = make(N, budget="evaluations", random_state=0).approximate(150, counting)
    assert len(set(counting.keys)) == counting.rows  # nothing evaluated twice
    # permutation sampling spends whole permutations, so it may stop short of the budget
    assert result.n_queries == counting.rows and 150 - (N - 1) < counting.rows <= 150
    assert result.n_draws > result.n_queries  # at n = 8 many draws repeat


def test_draws_count_every_sampled_coalition(game):
    counting = Counting(game)
    result = Adalina(N, random_state=0).approximate(150, counting)
    assert counting.rows == result.n_queries == result.n_draws == 150
    assert len(set(counting.keys)) < 150


@pytest.mark.parametrize("sv", ["shapley", 0.3])
def test_evaluations_change_the_accounting_not_the_estimator(game, sv):
    cached = Adalina(N, sv, budget="evaluations", batch_size=32, random_state=4)
    result = cached.approximate(200, game)
    # the same stream of draws, each paid for: the same estimate
    plain = Adalina(N, sv, batch_size=7, random_state=4).approximate(result.n_draws, game)
    np.testing.assert_allclose(result.values, plain.values, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(result.stderr, plain.stderr, rtol=1e-10)


def test_a_budget_beyond_the_drawable_coalitions_warns(game):
    with pytest.warns(UserWarning, match="distinct coalitions were not reached"):
        result = Adalina(N, budget="evaluations", random_state=0).approximate(2**N + 10, game)
    assert result.n_queries <= 2**N


def test_evaluation_checkpoints_count_evaluations(game):
    est = Adalina(N, budget="evaluations", random_state=0)
    result = est.approximate(200, game, checkpoints=[50, 100])
    np.testing.assert_array_equal(result.checkpoint_queries, [50, 100, 200])


def test_budget_rule_is_checked(game):
    with pytest.raises(ValueError, match=r"budget must be 'draws'.*or 'evaluations'"):
        Adalina(N, budget="queries").approximate(100, game)


def test_partial_fit_rejects_coalitions_it_did_not_draw(game):
    est = Adalina(N, random_state=0)
    est.partial_fit(est.initial_coalitions(), game(est.initial_coalitions()))
    masks = est.sample_coalitions(20)
    est.partial_fit(masks[10:], game(masks[10:]))  # any split, any order
    est.partial_fit(masks[:10][::-1], game(masks[:10][::-1]))
    before = est.values_.copy()
    foreign = np.zeros((1, N), bool)
    foreign[0, :3] = True
    with pytest.raises(ValueError, match=r"coalition \[0, 1, 2\] was not drawn by this estimator"):
        est.partial_fit(foreign, game(foreign))
    with pytest.raises(ValueError, match="more often than drawn"):
        est.partial_fit(masks[:1], game(masks[:1]))  # already spent
    assert est.n_queries_ == 22  # a rejected call changes nothing
    np.testing.assert_array_equal(est.values_, before)


def test_partial_fit_with_a_foreign_design_would_have_been_biased(game):
    # why the check exists: uniformly drawn coalitions folded in as if from Adalina's sampler
    from adalina import exact_semivalue

    truth = exact_semivalue(game, N)
    est = Adalina(N, random_state=0)
    rng = np.random.default_rng(0)
    foreign = rng.random((4000, N)) < 0.5
    foreign = foreign[(foreign.sum(1) > 0) & (foreign.sum(1) < N)]
    est._validate()
    est._reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est._update(est.initial_coalitions(), game(est.initial_coalitions()))
        est._update(foreign, game(foreign))
    biased = np.linalg.norm(est._estimate() - truth) / np.linalg.norm(truth)
    own = Adalina(N, random_state=0).approximate(foreign.shape[0] + 2, game).values
    assert biased > 3 * np.linalg.norm(own - truth) / np.linalg.norm(truth)
