"""scikit-learn's estimator protocol and shapiq in both directions (shapiq where it installs)."""

import re
from pathlib import Path

import numpy as np
import pytest
from adalina import (
    AbsoluteStandardError,
    Adalina,
    LinearApprox,
    PermutationSampling,
    ShapIQ,
    exact_semivalue,
)
from adalina_testgames import rel_error, tabulated

N = 7


@pytest.fixture(scope="module")
def game():
    return tabulated(N, seed=3, offset=1.0)


def test_sklearn_clone_round_trips_every_parameter():
    base = pytest.importorskip("sklearn.base")
    est = Adalina(
        N, (4, 1), budget="evaluations", stopping=AbsoluteStandardError(0.01), random_state=5
    )
    twin = base.clone(est)
    assert twin is not est and type(twin) is Adalina
    assert twin.get_params(deep=False) == est.get_params(deep=False)
    assert repr(twin) == repr(est)


def test_set_params_returns_self_and_names_bad_keys(game):
    est = Adalina(N, random_state=0)
    assert est.set_params(semivalue=0.3, batch_size=11) is est
    assert est.semivalue == 0.3 and est.batch_size == 11
    assert est.get_params()["semivalue"] == 0.3
    with pytest.raises(ValueError, match="invalid parameter 'alpha' for Adalina; valid"):
        est.set_params(alpha=1)
    # the new parameters are used
    same = Adalina(N, 0.3, batch_size=11, random_state=0).approximate(100, game).values
    np.testing.assert_array_equal(est.approximate(100, game).values, same)


def test_get_params_deep_nests_parameters_that_have_them():
    class Rule:
        def __init__(self, threshold=0.1):
            self.threshold = threshold

        def get_params(self, deep=True):
            return {"threshold": self.threshold}

        def set_params(self, **kw):
            self.threshold = kw["threshold"]

        def __call__(self, stderr, n_samples):
            return False

    est = Adalina(N, stopping=Rule())
    assert est.get_params(deep=True)["stopping__threshold"] == 0.1
    assert "stopping__threshold" not in est.get_params(deep=False)
    est.set_params(stopping__threshold=0.5)
    assert est.stopping.threshold == 0.5


def test_repr_shows_the_non_default_parameters():
    assert repr(Adalina(N)) == "Adalina(n=7)"
    assert repr(ShapIQ(N, budget="evaluations")) == "ShapIQ(n=7, budget='evaluations')"


def test_numpy_random_state_is_accepted_like_in_sklearn(game):
    a = Adalina(N, random_state=np.random.RandomState(3)).approximate(200, game)
    b = Adalina(N, random_state=np.random.RandomState(3)).approximate(200, game)
    np.testing.assert_array_equal(a.values, b.values)  # same seed, same result
    shared = np.random.RandomState(3)
    est = Adalina(N, random_state=shared)
    first, second = est.approximate(200, game).values, est.approximate(200, game).values
    assert not np.array_equal(first, second)  # a shared RandomState advances, as in sklearn


def test_a_game_with_n_players_must_match_n(game):
    with pytest.raises(ValueError, match="n_players=7 but Adalina was built for n=6"):
        Adalina(6).approximate(50, game)


# -- shapiq -----------------------------------------------------------------------------------------
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_the_test_extra_installs_shapiq_so_these_tests_run_in_ci():
    # 0.2.0 listed shapiq only under `peers`: CI installs `[test]`, so every test below was skipped
    # (a regex, not tomllib: Python 3.10 is supported)
    extras = dict(re.findall(r"^(\w+) = \[(.*)\]$", PYPROJECT.read_text(), flags=re.M))
    assert '"shapiq>=1.4"' in extras["test"]
    assert '"shapiq>=1.4"' in extras["peers"]


@pytest.fixture(scope="module")
def shapiq():
    # imported once per module, lazily: the rest of the suite does not pay shapiq's import time
    return pytest.importorskip("shapiq")


def test_shapiq_approximators_run_on_adalina_games(shapiq, game):
    truth = exact_semivalue(game, N)
    for approximator in (
        shapiq.KernelSHAP(n=N, random_state=0),
        shapiq.PermutationSamplingSV(n=N, random_state=0),
        shapiq.StratifiedSamplingSV(n=N, random_state=0),
    ):
        values = approximator.approximate(2**N, game)  # shapiq queries game(1-d coalition)
        got = np.array([values[(i,)] for i in range(N)])
        assert rel_error(got, truth) < 0.1, type(approximator).__name__


def test_adalina_runs_on_a_shapiq_game(shapiq):
    class Quadratic(shapiq.Game):
        def __init__(self):
            self.v = np.linspace(-1, 2, N)
            super().__init__(n_players=N, normalize=False)

        def value_function(self, coalitions):
            z = coalitions.astype(float)
            return z @ self.v + 0.3 * z.sum(axis=1) ** 2 / N

    peer = Quadratic()
    exact = shapiq.ExactComputer(n_players=N, game=peer)("SV", order=1)
    truth = np.array([exact[(i,)] for i in range(N)])
    result = Adalina(N, random_state=0).approximate(400 * N, peer)
    assert np.all(np.abs(result.values - truth) < 4 * result.stderr)
    assert rel_error(result.values, truth) < 0.15
    np.testing.assert_allclose(exact_semivalue(peer, N), truth, atol=1e-10)


def test_results_convert_to_interaction_values(shapiq, game):
    result = Adalina(N, "banzhaf", random_state=0).approximate(300, game)
    iv = result.to_interaction_values()
    assert isinstance(iv, shapiq.InteractionValues)
    assert iv.index == "BV" and iv.max_order == 1 and iv.n_players == N
    assert iv.estimation_budget == 300 and iv.estimated
    np.testing.assert_allclose([iv[(i,)] for i in range(N)], result.values)
    assert iv.baseline_value == pytest.approx(game.values[0])
    shapley = LinearApprox(N, gamma="midpoint", random_state=0).approximate(300, game)
    assert shapley.to_interaction_values().index == "SV"
    perm = PermutationSampling(N, random_state=0).approximate(300, game)
    assert perm.to_interaction_values().index == "SV"


def test_interaction_values_name_semivalues_shapiq_lacks(shapiq, game):
    result = Adalina(N, (16, 1), random_state=0).approximate(100, game)
    with pytest.warns(UserWarning, match="not a valid interaction index"):
        iv = result.to_interaction_values()
    assert iv.index == "beta(16,1)"


def test_budget_evaluations_counts_like_shapiq(shapiq, game):
    # shapiq's KernelSHAP spends its budget on distinct coalitions: so does budget="evaluations"
    class Counting:
        def __init__(self):
            self.rows = set()
            self.n_players = N

        def __call__(self, masks):
            masks = np.atleast_2d(masks)
            self.rows.update(map(bytes, np.packbits(masks, axis=1)))
            return game(masks)

    ours, theirs = Counting(), Counting()
    Adalina(N, budget="evaluations", random_state=0).approximate(90, ours)
    shapiq.KernelSHAP(n=N, random_state=0).approximate(90, theirs)
    assert len(ours.rows) == 90
    assert len(theirs.rows) <= 90
