import numpy as np
import pytest
from adalina import (
    Adalina,
    LinearApprox,
    MarginalGame,
    PermutationSampling,
    ShapIQ,
    TabularGame,
    sampling_distribution,
)


def game(m):
    return m.sum(axis=1).astype(float)


@pytest.mark.parametrize(
    ("make", "budget", "error", "match"),
    [
        (lambda: Adalina(1), 10, ValueError, "n must be >= 2"),
        (lambda: Adalina(2.5), 10, TypeError, "n must be an int"),
        (lambda: Adalina(5, 1.2), 10, ValueError, "0 < p < 1"),
        (lambda: Adalina(5, (0, 2)), 10, ValueError, "alpha > 0"),
        (lambda: Adalina(5, "owen"), 10, ValueError, "unknown semi-value 'owen'"),
        (lambda: Adalina(5), 2, ValueError, "budget of at least 3 queries"),
        (lambda: Adalina(5, include_extremes=True), 1, ValueError, "budget of at least 2"),
        (lambda: PermutationSampling(5), 5, ValueError, "budget of at least 6"),
        (lambda: Adalina(5), 10.0, TypeError, "budget must be an int"),
        (lambda: Adalina(5, 0.3, gamma=0.0, paired=True), 10, ValueError, "symmetric semi-value"),
        (lambda: Adalina(5, "shapley", paired=True), 10, ValueError, "gamma='adaptive'"),
        (lambda: Adalina(5, gamma="median"), 10, ValueError, "gamma must be one of"),
        (lambda: Adalina(5, gamma=np.inf), 10, ValueError, "gamma must be finite"),
        (
            lambda: Adalina(5, gamma="midpoint", include_extremes=True),
            10,
            ValueError,
            "include_extremes=True does not query",
        ),
        (lambda: Adalina(5, batch_size=0), 10, ValueError, "batch_size must be >= 1"),
        (lambda: Adalina(5, random_state="seed"), 10, TypeError, "random_state must be"),
        (
            lambda: LinearApprox(5, size_distribution=np.ones(3) / 3),
            10,
            ValueError,
            "one probability per size 1..4",
        ),
        (
            lambda: LinearApprox(
                5, 0.5, paired=True, size_distribution=np.array([0.1, 0.2, 0.3, 0.4])
            ),
            10,
            ValueError,
            "q_s = q_\\(n-s\\)",
        ),
    ],
)
def test_bad_parameters_are_named(make, budget, error, match):
    with pytest.raises(error, match=match):
        make().approximate(budget, game)


def test_parameters_are_stored_unchanged():
    est = Adalina(5, (4, 1), gamma="adaptive", batch_size=7, random_state=3)
    assert (est.n, est.semivalue, est.gamma, est.batch_size, est.random_state) == (
        5,
        (4, 1),
        "adaptive",
        7,
        3,
    )
    est.approximate(50, game)
    assert est.semivalue == (4, 1)
    assert est.values_.shape == (5,)
    assert est.n_queries_ == 50


def test_checkpoints_outside_the_budget():
    with pytest.raises(ValueError, match=r"checkpoints must lie in \[3, budget=100\]"):
        Adalina(5).approximate(100, game, checkpoints=[2, 50])
    with pytest.raises(ValueError, match="checkpoints must be >= 1"):
        Adalina(5).approximate(100, game, checkpoints=0)


def test_partial_fit_checks_its_input():
    est = Adalina(4)
    with pytest.raises(TypeError, match="boolean matrix"):
        est.partial_fit(np.zeros((2, 4)), np.zeros(2))
    with pytest.raises(ValueError, match=r"shape \(batch, 4\)"):
        est.partial_fit(np.zeros((2, 3), bool), np.zeros(2))
    with pytest.raises(ValueError, match=r"values must have shape \(2,\)"):
        est.partial_fit(np.zeros((2, 4), bool), np.zeros(3))
    masks = np.eye(4, dtype=bool)[:2]
    with pytest.raises(ValueError, match=r"non-finite value inf for coalition \[1\]"):
        est.partial_fit(masks, np.array([0.0, np.inf]))


def test_games_check_their_input():
    with pytest.raises(ValueError, match="2\\^n utilities"):
        TabularGame(np.zeros(6))
    with pytest.raises(ValueError, match="non-finite value at coalition \\[0, 1\\]"):
        TabularGame(np.array([0, 1, 2, np.nan, 4, 5, 6, 7.0]))
    with pytest.raises(ValueError, match=r"background must have shape \(rows >= 1, 3\)"):
        MarginalGame(lambda X: X.sum(1), np.zeros(3), np.zeros((5, 2)))
    table = TabularGame(np.arange(8.0))
    with pytest.raises(TypeError, match="boolean matrix"):
        table(np.zeros((1, 3)))
    with pytest.raises(ValueError, match=r"shape \(batch, 3\)"):
        table(np.zeros((1, 4), bool))


def test_errors_do_not_hide_in_baselines():
    with pytest.raises(ValueError, match="n must be >= 2"):
        ShapIQ(1).approximate(10, game)
    with pytest.raises(ValueError, match="n must be >= 2"):
        sampling_distribution(1)


def test_get_params_and_repr_follow_scikit_learn():
    est = Adalina(5, (4, 1), batch_size=7, random_state=3)
    assert est.get_params() == {
        "n": 5,
        "semivalue": (4, 1),
        "gamma": "adaptive",
        "include_extremes": False,
        "paired": False,
        "budget": "draws",
        "stopping": None,
        "batch_size": 7,
        "random_state": 3,
    }
    assert repr(est) == "Adalina(n=5, semivalue=(4, 1), batch_size=7, random_state=3)"
    assert repr(ShapIQ(6)) == "ShapIQ(n=6)"
    assert "size_distribution=array" in repr(LinearApprox(5, size_distribution=np.ones(4) / 4))
