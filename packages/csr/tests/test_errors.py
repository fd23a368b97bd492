import numpy as np
import pytest
from contrastive_sr import ContrastiveSymbolicRegressor

TINY = dict(n_gen=1, n_pop=8, ensemble_size=3, n_features=2)


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    return X, X[:, 0] ** 2 + rng.normal(size=40) * 0.1


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_features": 0}, "n_features"),
        ({"ensemble_size": 20, "n_pop": 10}, "ensemble_size=20 exceeds n_pop=10"),
        ({"p_crossover": 1.5}, "p_crossover"),
        ({"p_mutation": -0.1}, "p_mutation"),
        ({"primitives": ("add", "tanh")}, "unknown primitive"),
        ({"base_learner": "lr+dt"}, "base_learner"),
        ({"ensemble_selection": "greedy"}, "ensemble_selection"),
        ({"n_neighbors": 0}, "n_neighbors"),
        ({"init_depth": (3, 1)}, "init_depth"),
        ({"selection": "nsga2"}, "selection"),
    ],
)
def test_bad_parameters(kwargs, match, data):
    X, y = data
    with pytest.raises(ValueError, match=match):
        ContrastiveSymbolicRegressor(**{**TINY, **kwargs}).fit(X, y)


def test_bad_data(data):
    X, y = data
    est = ContrastiveSymbolicRegressor(**TINY)
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        est.fit(Xn, y)
    Xi = X.copy()
    Xi[1, 1] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        est.fit(Xi, y)
    with pytest.raises(ValueError, match="multi-output"):
        est.fit(X, np.column_stack([y, y]))
    with pytest.raises(ValueError, match="constant"):
        est.fit(X, np.full(40, 2.0))
    with pytest.raises(ValueError, match="n_samples=2"):
        est.fit(X[:2], y[:2])


def test_small_n_clamps_k_with_a_warning(data):
    X, y = data
    with pytest.warns(UserWarning, match="clamped"):
        est = ContrastiveSymbolicRegressor(**TINY, k_max=30, random_state=0).fit(X[:12], y[:12])
    assert max(est.k_selected_) <= 11


def test_feature_count_at_predict(data):
    X, y = data
    est = ContrastiveSymbolicRegressor(**TINY, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="3 features"):
        est.predict(X[:, :2])
    with pytest.raises(ValueError, match="member"):
        est.get_expressions(member=99)


def test_user_data_not_modified(data):
    X, y = data
    X32 = X.astype(np.float32)
    X_before, y_before = X32.copy(), y.copy()
    ContrastiveSymbolicRegressor(**TINY, random_state=0).fit(X32, y)
    assert X32.dtype == np.float32
    np.testing.assert_array_equal(X32, X_before)
    np.testing.assert_array_equal(y, y_before)
