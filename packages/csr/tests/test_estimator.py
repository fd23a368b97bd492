import numpy as np
import pytest
from contrastive_sr import BASE_LEARNERS, ContrastiveSymbolicRegressor
from sklearn.base import clone

TINY = dict(n_gen=2, n_pop=12, ensemble_size=4, n_features=3)


@pytest.fixture(scope="module")
def friedman():
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(240, noise=0.5, random_state=0)
    return X[:180], y[:180], X[180:], y[180:]


@pytest.fixture(scope="module")
def fitted(friedman):
    X, y, _, _ = friedman
    return ContrastiveSymbolicRegressor(n_gen=3, n_pop=20, ensemble_size=5, random_state=0).fit(
        X, y
    )


def test_check_estimator_tiny_budget():
    from sklearn.utils.estimator_checks import check_estimator

    # n_features at its default (10 trees): check_regressors_train asks for a training R² > 0.5
    check_estimator(
        ContrastiveSymbolicRegressor(n_gen=1, n_pop=10, ensemble_size=3, random_state=0)
    )


def test_clone_get_params_fit_returns_self(friedman):
    X, y, _, _ = friedman
    est = ContrastiveSymbolicRegressor(**TINY, random_state=3)
    assert clone(est).get_params() == est.get_params()
    assert est.fit(X, y) is est
    for attr in ("archive_", "archive_fitness_", "best_fitness_", "k_selected_", "n_evaluations_"):
        assert hasattr(est, attr)
    assert est.n_evaluations_ == 12 * 3
    assert len(est.archive_) == 4 and est.best_fitness_ == est.archive_fitness_.max()


def _same_seed_n_jobs_two_equals_one(X, y, Xt):
    a = ContrastiveSymbolicRegressor(**TINY, random_state=7).fit(X, y)
    b = ContrastiveSymbolicRegressor(**TINY, random_state=7, n_jobs=2).fit(X, y)
    c = ContrastiveSymbolicRegressor(**TINY, random_state=8).fit(X, y)
    assert [m.individual for m in a.archive_] == [m.individual for m in b.archive_]
    np.testing.assert_array_equal(a.predict(Xt), b.predict(Xt))
    assert [m.individual for m in a.archive_] != [m.individual for m in c.archive_]


def test_same_seed_same_archive_and_n_jobs_two_equals_one(friedman):
    from joblib import parallel_config

    X, y, Xt, _ = friedman
    with parallel_config(
        backend="threading"
    ):  # the same code path as loky, without process start-up
        _same_seed_n_jobs_two_equals_one(X, y, Xt)


@pytest.mark.slow
def test_n_jobs_two_processes_equals_one(friedman):
    X, y, Xt, _ = friedman
    _same_seed_n_jobs_two_equals_one(X, y, Xt)  # joblib's default loky backend: two processes


NUMPY_NAMES = {"Abs": np.abs, "sqrt": np.sqrt, "log": np.log, "sin": np.sin, "cos": np.cos,
               "pi": np.pi, "Max": np.maximum, "Min": np.minimum}  # fmt: skip


def test_expressions_reproduce_constructed_features(fitted, friedman):
    _, _, Xt, _ = friedman
    env = {**NUMPY_NAMES, **{f"x{j}": Xt[:, j] for j in range(Xt.shape[1])}}
    for member in range(len(fitted.archive_)):
        feats = fitted.constructed_features(Xt, member)
        for j, text in enumerate(fitted.get_expressions(member)):
            value = np.broadcast_to(np.asarray(eval(text, {}, env), dtype=float), (len(Xt),))
            np.testing.assert_allclose(value, feats[:, j], rtol=1e-8, atol=1e-8)


@pytest.mark.slow  # sympy's import and evaluation take longer than the rest of the suite
def test_expressions_parse_in_sympy(fitted, friedman):
    sympy = pytest.importorskip("sympy")
    _, _, Xt, _ = friedman
    names = sympy.symbols(" ".join(f"x{j}" for j in range(Xt.shape[1])))
    feats = fitted.constructed_features(Xt[:2])
    texts = fitted.get_expressions()
    shortest = sorted(range(len(texts)), key=lambda j: len(texts[j]))[:2]  # sympy is slow
    for j in shortest:
        expr = sympy.sympify(texts[j])
        for i in range(2):
            value = float(expr.subs(dict(zip(names, Xt[i].tolist(), strict=True))).evalf())
            assert value == pytest.approx(feats[i, j], rel=1e-8, abs=1e-8)


def test_transform_is_scaled_features_times_w(fitted, friedman):
    _, _, Xt, _ = friedman
    m = fitted.archive_[0]
    np.testing.assert_allclose(
        fitted.transform(Xt), m.scaling(fitted.constructed_features(Xt)) @ m.W
    )


def test_prediction_is_ridge_plus_knn_exactly(fitted, friedman):
    from contrastive_sr.neighbors import kneighbors

    _, _, Xt, _ = friedman
    preds = []
    for i, m in enumerate(fitted.archive_):
        Phi = m.scaling(fitted.constructed_features(Xt, i))
        out = Phi @ m.ridge.coef + m.ridge.intercept
        if m.k:
            out += m.r_train[kneighbors(m.Z_train, Phi @ m.W, m.k)].mean(axis=1)
        else:
            out += m.constant
        preds.append(out)
    expected = np.mean(preds, axis=0) * fitted.y_scale_ + fitted.y_mean_
    np.testing.assert_allclose(fitted.predict(Xt), expected, atol=1e-10)


def test_learns_friedman_better_than_ridge(fitted, friedman):
    from sklearn.linear_model import RidgeCV

    X, y, Xt, yt = friedman
    assert fitted.score(Xt, yt) > RidgeCV().fit(X, y).score(Xt, yt) + 0.05


@pytest.mark.parametrize("learner", sorted(BASE_LEARNERS))
def test_every_ablation_fits(learner, friedman):
    X, y, Xt, _ = friedman
    est = ContrastiveSymbolicRegressor(**TINY, base_learner=learner, random_state=0).fit(X, y)
    assert np.all(np.isfinite(est.predict(Xt)))
    ridge, contrastive, knn = BASE_LEARNERS[learner]
    m = est.archive_[0]
    assert (m.ridge is not None) == ridge
    assert contrastive or np.array_equal(m.W, np.eye(3))
    if knn == "none":
        assert m.k == 0


def test_top_archive_and_other_selections(friedman):
    X, y, _, _ = friedman
    for kw in (
        {"ensemble_selection": "top"},
        {"selection": "lexicase"},
        {"selection": "tournament"},
    ):
        est = ContrastiveSymbolicRegressor(**TINY, random_state=0, **kw).fit(X, y)
        assert len(est.archive_) == 4


def test_pandas_names_and_explain_instance(friedman):
    pd = pytest.importorskip("pandas")
    X, y, Xt, _ = friedman
    df = pd.DataFrame(X[:, :4], columns=["alpha", "beta", "gamma", "delta"])
    est = ContrastiveSymbolicRegressor(**TINY, random_state=0).fit(df, y)
    assert list(est.feature_names_in_) == ["alpha", "beta", "gamma", "delta"]
    text = " ".join(est.get_expressions())
    assert "x0" not in text and any(n in text for n in ("alpha", "beta", "gamma", "delta"))
    table = est.explain_instance(Xt[0, :4], k=3)
    assert list(table.columns) == ["train_index", "distance", "y"]
    assert table["distance"].is_monotonic_increasing
    np.testing.assert_allclose(table["y"], y[table["train_index"]])


def test_categorical_columns_target_encoded_or_rejected():
    rng = np.random.default_rng(0)
    X = np.empty((60, 2), dtype=object)
    X[:, 0] = rng.normal(size=60)
    X[:, 1] = rng.choice(["a", "b", "c"], size=60)
    y = X[:, 0].astype(float) + (X[:, 1] == "b") * 3.0
    est = ContrastiveSymbolicRegressor(**TINY, random_state=0).fit(X, y)
    assert np.all(np.isfinite(est.predict(X)))
    with pytest.raises(TypeError, match="categorical"):
        ContrastiveSymbolicRegressor(**TINY, categorical_encoding=None).fit(X, y)


def test_torch_knn_backend_same_predictions(friedman):
    pytest.importorskip("torch")
    X, y, Xt, _ = friedman
    a = ContrastiveSymbolicRegressor(**TINY, random_state=1).fit(X, y)
    b = ContrastiveSymbolicRegressor(**TINY, random_state=1, knn_backend="torch").fit(X, y)
    np.testing.assert_allclose(a.predict(Xt), b.predict(Xt), atol=1e-10)


def test_readme_example_runs():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    blocks = [b.split("```", 1)[0] for b in readme.split("```python\n")[1:]]
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
