import numpy as np
import pytest
from adalina import SemiValue, TabularGame, exact_semivalue, paper_semivalues
from adalina_testgames import quadratic_game, semivalue_by_marginals, tabulated

SVS = [SemiValue.shapley(), *paper_semivalues()]


@pytest.mark.parametrize("sv", SVS, ids=str)
def test_exact_matches_the_definition(sv):
    n = 7
    game = quadratic_game(n, seed=3)
    np.testing.assert_allclose(
        exact_semivalue(game, n, sv), semivalue_by_marginals(game, n, sv), rtol=1e-10, atol=1e-12
    )


@pytest.mark.parametrize("sv", SVS, ids=str)
def test_additive_game_gives_its_weights(sv):
    n = 8
    v = np.random.default_rng(0).normal(size=n)
    np.testing.assert_allclose(exact_semivalue(lambda m: m @ v + 3.0, n, sv), v, atol=1e-12)


def test_shapley_efficiency():
    n = 9
    game = tabulated(n, seed=1)
    phi = exact_semivalue(game, n, "shapley")
    assert np.isclose(phi.sum(), game.values[-1] - game.values[0], rtol=1e-12)


@pytest.mark.parametrize(
    "sv", [SemiValue.shapley(), SemiValue.banzhaf(0.2), SemiValue.beta_shapley(4, 1)], ids=str
)
def test_symmetric_and_null_players(sv):
    # players 0 and 1 are interchangeable, player 4 changes nothing
    n = 6

    def game(m):
        z = m.astype(float)
        return np.tanh(z[:, 0] + z[:, 1] + 2 * z[:, 2] - z[:, 3] * z[:, 5]) + z[:, 0] * z[:, 1]

    phi = exact_semivalue(game, n, sv)
    assert np.isclose(phi[0], phi[1], rtol=1e-12)
    assert abs(phi[4]) < 1e-14


def test_linearity():
    n = 7
    g1, g2 = tabulated(n, seed=1), tabulated(n, seed=2)
    both = TabularGame(2.0 * g1.values - 0.5 * g2.values)
    for sv in (SemiValue.shapley(), SemiValue.banzhaf(0.7)):
        expected = 2.0 * exact_semivalue(g1, n, sv) - 0.5 * exact_semivalue(g2, n, sv)
        np.testing.assert_allclose(exact_semivalue(both, n, sv), expected, atol=1e-12)


def test_table_and_callable_agree_across_chunks():
    n = 10
    game = quadratic_game(n)
    np.testing.assert_allclose(
        exact_semivalue(game, n, 0.4, chunk_size=100),
        exact_semivalue(TabularGame.from_game(game, n), n, 0.4),
    )


def test_guard_on_n():
    with pytest.raises(ValueError, match="n <= 20"):
        exact_semivalue(lambda m: m.sum(1), 21)


@pytest.mark.slow
def test_against_shapiq_exact_computer():
    shapiq = pytest.importorskip("shapiq")
    n = 8
    game = tabulated(n, seed=4)
    computer = shapiq.ExactComputer(n_players=n, game=game)
    for index, sv in (("SV", "shapley"), ("BV", "banzhaf")):
        ref = computer(index=index, order=1)
        theirs = np.array([ref[(i,)] for i in range(n)])
        np.testing.assert_allclose(exact_semivalue(game, n, sv), theirs, atol=1e-10)
