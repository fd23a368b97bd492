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
        ({"init_depth": 5}, r"init_depth must be a \(low, high\) pair .* got 5"),
        ({"init_depth": (0.5, 2)}, r"init_depth .* got \(0.5, 2\)"),
        ({"init_depth": (0, 11)}, "max_height=10"),
        ({"contrastive_reg": float("nan")}, "contrastive_reg must be a finite float >= 0, got nan"),
        ({"contrastive_reg": float("inf")}, "contrastive_reg must be a finite float >= 0, got inf"),
        ({"contrastive_reg": -1.0}, "contrastive_reg"),
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


@pytest.mark.parametrize("reg", [float("nan"), float("inf"), -1.0])
def test_contrastive_metric_bad_reg(reg, data):
    from contrastive_sr import ContrastiveMetric

    X, y = data
    with pytest.raises(ValueError, match=f"reg must be a finite float >= 0, got {reg}"):
        ContrastiveMetric(reg=reg).fit(X, y)


@pytest.mark.parametrize("scale", [1e200, 1e-300])
def test_extreme_target_scale_gives_scaled_results(scale, data):
    # y × 1e200 overflowed y.std() (an empty archive, IndexError); y × 1e-300 underflowed it to 0
    X, y = data
    ref = ContrastiveSymbolicRegressor(**TINY, random_state=0).fit(X, y)
    est = ContrastiveSymbolicRegressor(**TINY, random_state=0).fit(X, y * scale)
    pred = est.predict(X)
    assert np.all(np.isfinite(pred))
    np.testing.assert_allclose(pred / scale, ref.predict(X), rtol=1e-6)
    assert est.score(X, y * scale) == pytest.approx(ref.score(X, y), abs=1e-6)


def test_dataframe_columns_reordered_at_predict_raise():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.normal(size=(40, 3)), columns=["a", "b", "c"])
    df["cat"] = rng.choice(["hi", "lo"], size=40)
    y = df["a"].to_numpy() ** 2 + (df["cat"] == "hi") * 1.0
    est = ContrastiveSymbolicRegressor(**TINY, random_state=0).fit(df, y)
    with pytest.raises(ValueError, match="same order as in fit: expected"):
        est.predict(df[["cat", "a", "b", "c"]])
    with pytest.raises(ValueError, match="feature names should match"):
        est.predict(df.rename(columns={"a": "z"}))
    num = ContrastiveSymbolicRegressor(**TINY, random_state=0).fit(df[["a", "b", "c"]], y)
    with pytest.raises(ValueError, match="same order"):
        num.predict(df[["c", "b", "a"]])
