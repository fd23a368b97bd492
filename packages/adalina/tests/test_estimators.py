import numpy as np
import pytest
from adalina import (
    Adalina,
    LinearApprox,
    NotFittedError,
    SemiValue,
    TabularGame,
    exact_semivalue,
    sampling_distribution,
)
from adalina.sampling import (
    draw_coalitions,
    sample_vector_coefficients,
    sample_vectors,
    size_support,
)
from adalina_testgames import rel_error, tabulated

N = 8


@pytest.fixture(scope="module")
def game():
    return tabulated(N, seed=0, offset=2.0)


class CountingGame:
    def __init__(self, inner):
        self.inner, self.rows, self.calls, self.extremes = inner, 0, 0, 0

    def __call__(self, masks):
        self.rows += masks.shape[0]
        self.calls += 1
        sizes = masks.sum(axis=1)
        self.extremes += int(((sizes == 0) | (sizes == masks.shape[1])).sum())
        return self.inner(masks)


@pytest.mark.parametrize("include_extremes", [False, True])
def test_constant_game_gives_exactly_zero(include_extremes):
    for seed in range(5):
        est = Adalina(N, 0.3, include_extremes=include_extremes, random_state=seed)
        result = est.approximate(57, lambda m: np.full(m.shape[0], 3.7))
        assert np.all(result.values == 0.0), seed


@pytest.mark.parametrize("sv", ["shapley", 0.2, (16, 1)])
def test_translation_and_scaling(game, sv):
    base = Adalina(N, sv, random_state=4).approximate(300, game).values
    shifted = Adalina(N, sv, random_state=4).approximate(300, TabularGame(game.values + 1e3)).values
    scaled = Adalina(N, sv, random_state=4).approximate(300, TabularGame(-2.5 * game.values)).values
    # accumulation is centred on the first utility, so an offset of 1e3 costs no precision
    np.testing.assert_allclose(shifted, base, rtol=0, atol=1e-11)
    np.testing.assert_allclose(scaled, -2.5 * base, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize(
    ("sv", "gamma"), [("shapley", 0.0), (0.3, "midpoint"), ((1, 4), "empty"), ((4, 1), 1.7)]
)
def test_fixed_gamma_is_unbiased(game, sv, gamma):
    # 4000 independent runs of budget 4n, vectorised with the package's sampling maths and checked
    # against LinearApprox on one run (same stream) below
    n, reps, m = N, 4000, 4 * N - 2
    q = sampling_distribution(n, sv)
    inside, outside = sample_vector_coefficients(n, sv, q)
    masks = draw_coalitions(np.random.default_rng(11), reps * m, n, q, size_support(n))
    a = sample_vectors(masks, inside, outside).reshape(reps, m, n)
    u = game(masks).reshape(reps, m)
    u_empty, u_full = game.values[0], game.values[-1]
    g = {"midpoint": (u_empty + u_full) / 2, "empty": u_empty}.get(gamma, gamma)
    w = SemiValue.coerce(sv).weights(n)
    est = np.einsum("rmi,rm->ri", a, u - g) / m + ((u_full - g) * w[-1] - (u_empty - g) * w[0])
    truth = exact_semivalue(game, n, sv)
    z = (est.mean(axis=0) - truth) / (est.std(axis=0, ddof=1) / np.sqrt(reps))
    assert np.max(np.abs(z)) < 4


def test_class_matches_the_formula_on_one_stream(game):
    n, m, sv, gamma = N, 40, 0.3, 1.25
    est = LinearApprox(N, sv, gamma=gamma, random_state=3, batch_size=1000)
    got = est.approximate(m + 2, game).values
    q = sampling_distribution(n, sv)
    masks = draw_coalitions(np.random.default_rng(3), m, n, q, size_support(n))
    a = sample_vectors(masks, *sample_vector_coefficients(n, sv, q))
    w = SemiValue.coerce(sv).weights(n)
    u_empty, u_full = game.values[0], game.values[-1]
    expected = a.T @ (game(masks) - gamma) / m + (u_full - gamma) * w[-1] - (u_empty - gamma) * w[0]
    np.testing.assert_allclose(got, expected, rtol=1e-10)
    # Adalina on the same stream plugs in the sample mean
    ada = Adalina(N, sv, random_state=3, batch_size=1000).approximate(m + 2, game)
    assert np.isclose(ada.gamma, game(masks).mean())


def test_adalina_all_matches_its_formula(game):
    m, sv = 50, (16, 1)
    got = Adalina(N, sv, include_extremes=True, random_state=9).approximate(m, game)
    q = sampling_distribution(N, sv, include_extremes=True)
    masks = draw_coalitions(np.random.default_rng(9), m, N, q, size_support(N, True))
    a = sample_vectors(masks, *sample_vector_coefficients(N, sv, q, include_extremes=True))
    u = game(masks)
    # no extreme queries, no shift: mean a(S) U(S) - mean a(S) * mean U(S)
    np.testing.assert_allclose(got.values, (a.T @ u) / m - a.mean(0) * u.mean(), rtol=1e-10)


@pytest.mark.parametrize(
    ("sv", "include_extremes"), [("shapley", False), ((4, 1), False), (0.3, True)]
)
def test_adalina_is_the_fixed_gamma_estimator_at_its_own_gamma(game, sv, include_extremes):
    # Adalina and the fixed-γ estimators share the sample stream for a seed, so the reproduction's
    # "Adalina vs γ = midpoint" comparison is paired: the two differ only in γ.
    ada = Adalina(N, sv, include_extremes=include_extremes, random_state=12).approximate(333, game)
    fixed = LinearApprox(
        N, sv, gamma=ada.gamma, include_extremes=include_extremes, random_state=12
    ).approximate(333, game)
    np.testing.assert_allclose(ada.values, fixed.values, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("sv", ["shapley", 0.8, (2, 2)])
@pytest.mark.parametrize("include_extremes", [False, True])
def test_error_falls_like_one_over_sqrt_budget(sv, include_extremes):
    n = 10
    game = tabulated(n, seed=2)
    truth = exact_semivalue(game, n, sv)
    ratios = []
    for seed in range(9):
        est = Adalina(n, sv, include_extremes=include_extremes, random_state=seed, batch_size=4000)
        est.approximate(16 * 100 * n, game, checkpoints=[100 * n])
        small, large = est.trajectory_[0], est.trajectory_[-1]
        ratios.append(rel_error(large, truth) / rel_error(small, truth))
    assert np.median(ratios) <= 0.35


def test_streaming_equals_one_shot(game):
    one = Adalina(N, 0.4, random_state=2, batch_size=10_000).approximate(502, game).values
    stream = Adalina(N, 0.4, random_state=2)
    stream.partial_fit(stream.initial_coalitions(), game(stream.initial_coalitions()))
    for k in (1, 99, 3, 200, 197):
        masks = stream.sample_coalitions(k)
        stream.partial_fit(masks, game(masks))
    assert stream.n_queries_ == 502
    np.testing.assert_allclose(stream.values_, one, rtol=1e-12, atol=1e-14)


@pytest.mark.filterwarnings("ignore:budget=3 is below")
@pytest.mark.parametrize("budget", [3, 57, 100, 101, 1234])
@pytest.mark.parametrize("include_extremes", [False, True])
def test_budget_is_spent_exactly(game, budget, include_extremes):
    counting = CountingGame(game)
    est = Adalina(N, include_extremes=include_extremes, batch_size=100, random_state=0)
    result = est.approximate(budget, counting)
    assert counting.rows == result.n_queries == est.n_queries_ == budget
    assert counting.calls == -(-budget // 100)
    if not include_extremes:
        assert counting.extremes == 2


def test_batch_size_does_not_change_the_estimate(game):
    a = Adalina(N, "shapley", random_state=7, batch_size=5).approximate(400, game).values
    b = Adalina(N, "shapley", random_state=7, batch_size=400).approximate(400, game).values
    np.testing.assert_allclose(a, b, rtol=1e-12)


def test_same_seed_same_result_and_generators(game):
    r1 = Adalina(N, random_state=5).approximate(200, game).values
    r2 = Adalina(N, random_state=5).approximate(200, game).values
    r3 = Adalina(N, random_state=6).approximate(200, game).values
    assert np.array_equal(r1, r2) and not np.array_equal(r1, r3)
    gen = np.random.default_rng(0)
    est = Adalina(N, random_state=gen)
    assert not np.array_equal(est.approximate(200, game).values, est.approximate(200, game).values)


def test_checkpoints_record_the_running_estimate(game):
    est = Adalina(N, random_state=1, batch_size=7)
    result = est.approximate(500, game, checkpoints=5)
    np.testing.assert_array_equal(result.checkpoint_queries, [100, 200, 300, 400, 500])
    assert result.trajectory.shape == (5, N)
    np.testing.assert_allclose(result.trajectory[-1], result.values)
    # the estimate after 200 queries is a prefix of the same stream
    prefix = Adalina(N, random_state=1, batch_size=7).approximate(200, game).values
    np.testing.assert_allclose(result.trajectory[1], prefix, rtol=1e-12)


def test_paired_sampling_is_unbiased_and_uses_complements(game):
    est = LinearApprox(N, "shapley", gamma="midpoint", paired=True, random_state=0)
    masks = est.sample_coalitions(10)
    np.testing.assert_array_equal(masks[0::2], ~masks[1::2])
    truth = exact_semivalue(game, N, "shapley")
    runs = np.array(
        [
            LinearApprox(N, gamma="midpoint", paired=True, random_state=s)
            .approximate(42, game)
            .values
            for s in range(400)
        ]
    )
    z = (runs.mean(0) - truth) / (runs.std(0, ddof=1) / np.sqrt(len(runs)))
    assert np.max(np.abs(z)) < 4.5


def test_values_before_fit_raise():
    est = Adalina(N)
    with pytest.raises(NotFittedError, match="seen no coalitions"):
        _ = est.values_
    masks = est.sample_coalitions(5)
    est.partial_fit(masks, np.ones(5))
    with pytest.raises(NotFittedError, match="initial_coalitions"):
        _ = est.values_


def test_large_n_runs_in_linear_memory():
    n = 1500
    v = np.random.default_rng(0).normal(size=n)
    est = Adalina(n, 0.5, random_state=0, batch_size=1000)
    result = est.approximate(4 * n, lambda m: m @ v)
    # binomial weights of n = 1500 overflow when formed directly; on an additive game (the truth
    # is v) the estimate stays finite and its standard errors cover v at the nominal rate
    assert np.all(np.isfinite(result.values))
    covered = np.abs(result.values - v) <= 1.96 * result.std_error
    assert 0.9 <= covered.mean() <= 0.98
    assert est._sum_a.shape == (n,)  # the O(n) state


def test_small_budget_warns(game):
    with pytest.warns(UserWarning, match="budget=5 is below the number of players n=8"):
        Adalina(N, random_state=0).approximate(5, game)


def test_std_error_names_are_aliases_of_stderr(game):
    est = Adalina(N, random_state=0)
    result = est.approximate(400, game)
    np.testing.assert_array_equal(result.std_error, result.stderr)
    np.testing.assert_array_equal(est.std_error_, est.stderr_)
    np.testing.assert_array_equal(result.stderr, est.stderr_)


def test_adaptive_stderr_is_the_delta_method_on_the_sample_vectors(game):
    m, sv = 40, (4, 1)
    result = Adalina(N, sv, random_state=5, batch_size=9).approximate(m + 2, game)
    q = sampling_distribution(N, sv)
    masks = draw_coalitions(np.random.default_rng(5), m, N, q, size_support(N))
    a = sample_vectors(masks, *sample_vector_coefficients(N, sv, q))
    u = game(masks)
    w = SemiValue.coerce(sv).weights(N)
    # influence of one sample on phi = mean(a U) - mean(a) Ū + (U_N - Ū) w_{n-1} - (U_∅ - Ū) w_0
    psi = a * (u - u.mean())[:, None] - (a.mean(axis=0) + w[-1] - w[0]) * u[:, None]
    np.testing.assert_allclose(result.stderr, psi.std(axis=0, ddof=1) / np.sqrt(m), rtol=1e-8)


def test_standard_errors_match_the_sample_vectors(game):
    m, sv, gamma = 30, (1, 4), 0.7
    est = LinearApprox(N, sv, gamma=gamma, random_state=5, batch_size=7)
    result = est.approximate(m + 2, game)
    q = sampling_distribution(N, sv)
    masks = draw_coalitions(np.random.default_rng(5), m, N, q, size_support(N))
    terms = (
        sample_vectors(masks, *sample_vector_coefficients(N, sv, q))
        * (game(masks) - gamma)[:, None]
    )
    np.testing.assert_allclose(result.std_error, terms.std(axis=0, ddof=1) / np.sqrt(m), rtol=1e-8)


def test_unreturned_draws_are_the_only_non_linear_state_and_forget_issued_frees_them():
    import tracemalloc

    n = 200
    est = Adalina(n, random_state=0)
    est.forget_issued(est.sample_coalitions(10))  # the O(n) state itself, allocated once
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(5):
            est.sample_coalitions(4000)  # drawn, never returned
        held = tracemalloc.get_traced_memory()[0] - before
        est.forget_issued()
        freed = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # ~n/8 + 60-90 bytes per unreturned coalition (README): ~19k distinct keys -> ~1.7 MB
    assert 1.0e6 < held < 3.0e6
    assert freed < 0.05e6


def test_forget_issued_with_rows_refuses_them_in_partial_fit(game):
    est = Adalina(N, random_state=0)
    masks = est.sample_coalitions(6)
    est.forget_issued(masks[:2])
    est.partial_fit(masks[2:], game(masks[2:]))
    with pytest.raises(ValueError, match="was not drawn by this estimator"):
        est.partial_fit(masks[:1], game(masks[:1]))
    with pytest.raises(ValueError, match=r"boolean \(m, 8\) array"):
        est.forget_issued(np.ones((2, 3), dtype=bool))


def test_set_params_is_checked_by_the_next_stream_call():
    est = Adalina(N, random_state=0)
    est.sample_coalitions(4)
    est.set_params(semivalue=(1.0, -2.0))
    # 0.2.0 validated only on the first call and went on sampling under the old semi-value
    with pytest.raises(ValueError, match="Beta Shapley needs beta > 0"):
        est.sample_coalitions(4)
    est.set_params(semivalue=0.3)
    masks = est.sample_coalitions(4)  # a fresh stream under the new semi-value
    assert masks.shape == (4, N)
