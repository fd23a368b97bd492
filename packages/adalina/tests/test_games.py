import joblib
import numpy as np
import pytest
import torch
from adalina import (
    Adalina,
    DataValuationGame,
    MarginalGame,
    TabularGame,
    TreeGame,
    evaluate,
    exact_semivalue,
)
from adalina.games import all_coalitions
from sklearn.datasets import load_diabetes, make_classification, make_regression
from sklearn.ensemble import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.linear_model import LinearRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor


def recursive_tree_value(tree, leaves, x, mask, node=0):
    """Path-dependent expectation by plain recursion (the oracle for the vectorised pass)."""
    left, right = tree.children_left[node], tree.children_right[node]
    if left == -1:
        return leaves[node]
    f = tree.feature[node]
    if mask[f]:
        child = left if x[f] <= tree.threshold[node] else right
        return recursive_tree_value(tree, leaves, x, mask, child)
    w = tree.weighted_n_node_samples
    return (
        w[left] * recursive_tree_value(tree, leaves, x, mask, left)
        + w[right] * recursive_tree_value(tree, leaves, x, mask, right)
    ) / w[node]


@pytest.fixture(scope="module")
def regression():
    X, y = make_regression(300, 6, noise=5.0, random_state=0)
    return X.astype(np.float32).astype(float), y


def test_tree_game_matches_recursion(regression):
    X, y = regression
    model = DecisionTreeRegressor(max_depth=5, random_state=0).fit(X, y)
    game = TreeGame(model, X[3])
    masks = np.random.default_rng(0).random((40, 6)) < 0.5
    leaves = model.tree_.value[:, 0, 0]
    expected = [recursive_tree_value(model.tree_, leaves, X[3], m) for m in masks]
    np.testing.assert_allclose(game(masks), expected, rtol=1e-12)


@pytest.mark.parametrize(
    ("make", "out"),
    [
        (
            lambda: GradientBoostingRegressor(n_estimators=10, max_depth=4, random_state=0),
            "predict",
        ),
        (lambda: RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0), "predict"),
        (
            lambda: GradientBoostingClassifier(n_estimators=10, max_depth=3, random_state=0),
            "decision",
        ),
        (lambda: RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0), "proba"),
        (lambda: DecisionTreeClassifier(max_depth=4, random_state=0), "proba"),
    ],
)
def test_full_coalition_is_the_model_output(make, out):
    if out == "predict":
        X, y = make_regression(200, 5, random_state=1)
    else:
        X, y = make_classification(200, 5, n_informative=3, n_redundant=0, random_state=1)
    model = make().fit(X, y)
    x = X[7]
    game = TreeGame(model, x)
    expected = {
        "predict": lambda: model.predict(x[None])[0],
        "decision": lambda: model.decision_function(x[None])[0],
        "proba": lambda: model.predict_proba(x[None])[0, 1],
    }[out]()
    full, empty = game(np.array([[True] * 5, [False] * 5]))
    assert np.isclose(full, expected, rtol=1e-9)
    if out == "proba":  # no feature known: the training share of class 1
        assert np.isclose(empty, np.mean(y == 1), atol=1e-9 if "Decision" in repr(model) else 0.05)


def test_tree_game_multiclass_needs_an_output():
    X, y = make_classification(150, 5, n_informative=3, n_classes=3, random_state=0)
    model = GradientBoostingClassifier(n_estimators=5, max_depth=2, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="pass output=<class index>"):
        TreeGame(model, X[0])
    game = TreeGame(model, X[0], output=2)
    assert np.isclose(game(np.ones((1, 5), bool))[0], model.decision_function(X[:1])[0, 2])


def test_tree_game_rejects_other_models(regression):
    X, y = regression
    with pytest.raises(TypeError, match="unsupported model LinearRegression"):
        TreeGame(LinearRegression().fit(X, y), X[0])


def test_tree_game_matches_shap_tree_explainer():
    shap = pytest.importorskip("shap")
    X, y = load_diabetes(return_X_y=True)
    model = GradientBoostingRegressor(n_estimators=10, max_depth=5, random_state=0).fit(X, y)
    explainer = shap.TreeExplainer(model, feature_perturbation="tree_path_dependent")
    for row in (0, 11):
        theirs = explainer.shap_values(X[row : row + 1])[0]
        ours = exact_semivalue(TreeGame(model, X[row]), X.shape[1], "shapley")
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6 * np.abs(theirs).max())


def test_marginal_game_linear_model_closed_form():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 5))
    w = rng.normal(size=5)
    model = LinearRegression().fit(X, X @ w + 1.0)
    game = MarginalGame(model.predict, X[0], X[:40], max_rows=100)
    # interventional Shapley of a linear model: w_i (x_i - mean background_i), for every semi-value
    expected = model.coef_ * (X[0] - X[:40].mean(axis=0))
    for sv in ("shapley", 0.2, (4, 1)):
        np.testing.assert_allclose(exact_semivalue(game, 5, sv), expected, atol=1e-10)


def test_data_valuation_game_parallel_equals_serial():
    X, y = make_classification(60, 4, n_informative=2, n_redundant=0, random_state=0)
    kw = dict(X_val=X[40:], y_val=y[40:])
    serial = DataValuationGame(KNeighborsClassifier(3), X[:12], y[:12], **kw)
    parallel = DataValuationGame(KNeighborsClassifier(3), X[:12], y[:12], n_jobs=2, **kw)
    masks = np.random.default_rng(0).random((16, 12)) < 0.6
    masks[0] = False
    # the active joblib backend decides where the work runs (threads keep the test fast)
    with joblib.parallel_config(backend="threading"):
        got = parallel(masks)
    np.testing.assert_allclose(got, serial(masks))
    assert got[0] == 0.0  # the empty training set is worth default_score
    full = KNeighborsClassifier(3).fit(X[:12], y[:12]).score(X[40:], y[40:])
    assert np.isclose(serial(np.ones((1, 12), bool))[0], full)


def test_data_valuation_single_class_gets_default_score():
    from sklearn.linear_model import LogisticRegression

    X, y = make_classification(40, 3, n_informative=2, n_redundant=0, random_state=0)
    game = DataValuationGame(
        LogisticRegression(), X[:10], y[:10], X[20:], y[20:], default_score=0.5
    )
    one_class = np.zeros((1, 10), bool)
    one_class[0, np.flatnonzero(y[:10] == 1)[:2]] = True
    assert game(one_class)[0] == 0.5


def test_tabular_game_round_trip():
    n = 5
    v = np.arange(n, dtype=float)
    table = TabularGame.from_game(lambda m: m @ v, n)
    masks = all_coalitions(n)[::-1]
    np.testing.assert_allclose(table(masks), masks @ v)


def test_torch_games_are_accepted():
    v = torch.arange(6, dtype=torch.float64)
    game = lambda m: torch.as_tensor(m, dtype=torch.float64) @ v  # noqa: E731
    result = Adalina(6, random_state=0).approximate(300, game)
    assert result.values.dtype == np.float64
    np.testing.assert_allclose(exact_semivalue(game, 6), v.numpy(), atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.int64])
def test_low_precision_torch_outputs_are_widened(dtype):
    # 0.2.0: a bfloat16 tensor reached numpy and raised a bare TypeError
    v = torch.tensor([1.0, 2.0, 4.0, 8.0])
    game = lambda m: (torch.as_tensor(m, dtype=torch.float32) @ v).to(dtype)  # noqa: E731
    np.testing.assert_allclose(exact_semivalue(game, 4), v.numpy(), atol=1e-12)


def test_data_valuation_check_fit_serves_the_full_coalition():
    X, y = make_classification(40, 3, n_informative=2, n_redundant=0, random_state=0)
    fits = []

    class Counted(KNeighborsClassifier):
        def fit(self, X, y):
            fits.append(len(y))
            return super().fit(X, y)

    game = DataValuationGame(Counted(3), X[:10], y[:10], X[20:], y[20:])
    masks = np.zeros((3, 10), bool)
    masks[0], masks[1, :6] = True, True  # the full set, a subset, the empty set
    game(masks)
    # 0.2.0 fitted the full training set twice (the uncharged check, then the query)
    assert fits == [10, 6]


def test_wrong_shape_is_named():
    with pytest.raises(ValueError, match=r"shape \(4,\).*got shape \(4, 1\)"):
        evaluate(lambda m: np.zeros((m.shape[0], 1)), np.ones((4, 3), bool))


def test_non_finite_value_names_the_coalition():
    def game(m):
        out = m.sum(axis=1).astype(float)
        out[m[:, 0] & m[:, 2] & ~m[:, 1]] = np.nan
        return out

    with pytest.raises(ValueError, match=r"non-finite value \(nan\) for coalition \[0, 2\]"):
        exact_semivalue(game, 3)


def test_index_list_games_get_a_hint():
    subsets = [(), (0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)]
    table = {s: float(len(s) ** 2) for s in subsets}

    def game(coalitions):  # written for lists of player indices
        return np.array([table[tuple(int(i) for i in s)] for s in coalitions])

    masks = np.array([[True, False, True]])
    assert game([np.flatnonzero(m) for m in masks])[0] == 4.0  # what the game expects

    with pytest.raises(TypeError, match="boolean \\(batch, n_players\\) matrix"):
        Adalina(3, random_state=0).approximate(10, game)


def test_a_genuine_type_error_is_not_blamed_on_index_lists():
    def game(masks):  # a bug in the user's game, whatever the input
        return masks.astype(float).sum(axis=1) + "oops"

    with pytest.raises(TypeError, match=r"oops|ufunc|add") as info:
        Adalina(3, random_state=0).approximate(10, game)
    assert "index" not in str(info.value)


def test_games_take_one_1d_coalition_like_shapiq():
    table = TabularGame(np.arange(8.0))
    np.testing.assert_array_equal(table(np.array([True, False, True])), [5.0])
    assert table(np.zeros(3, bool)).shape == (1,)


def test_data_valuation_wrong_validation_set_raises_naming_shapes():
    from sklearn.linear_model import LogisticRegression

    X, y = make_classification(40, 3, n_informative=2, n_redundant=0, random_state=0)
    with pytest.raises(ValueError, match=r"X_val must have shape \(rows, 3\).*got \(20, 2\)"):
        DataValuationGame(LogisticRegression(), X[:10], y[:10], X[20:, :2], y[20:])
    with pytest.raises(ValueError, match=r"y_val must have shape \(20,\).*got \(19,\)"):
        DataValuationGame(LogisticRegression(), X[:10], y[:10], X[20:], y[21:])


def test_data_valuation_setup_errors_are_not_swallowed():
    from sklearn.linear_model import LogisticRegression

    X, y = make_classification(40, 3, n_informative=2, n_redundant=0, random_state=0)

    def bad_scorer(fitted, X_val, y_val):  # a scorer that cannot apply to this model
        raise ValueError("scorer needs predict_proba of shape (rows, 3)")

    game = DataValuationGame(
        LogisticRegression(), X[:10], y[:10], X[20:], y[20:], scoring=bad_scorer
    )
    with pytest.raises(ValueError, match="scorer needs predict_proba"):
        Adalina(10, random_state=0).approximate(40, game)


def _reference_tree_values(tree, leaves, x, masks):
    # the 0.1 walk: one probability row per node (nodes x batch), in index order
    prob = np.zeros((tree.node_count, masks.shape[0]))
    prob[0] = 1.0
    out = np.zeros(masks.shape[0])
    for node in range(tree.node_count):
        left, right = tree.children_left[node], tree.children_right[node]
        if left == -1:
            out += prob[node] * leaves[node]
            continue
        f = tree.feature[node]
        share = tree.weighted_n_node_samples[left] / tree.weighted_n_node_samples[node]
        to_left = np.where(masks[:, f], float(x[f] <= tree.threshold[node]), share)
        prob[left], prob[right] = prob[node] * to_left, prob[node] * (1 - to_left)
    return out


def test_tree_walk_matches_the_dense_walk_and_stays_small():
    import tracemalloc

    from adalina.trees import _leaf_values, path_dependent_values
    from sklearn.tree import DecisionTreeRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 9))
    model = DecisionTreeRegressor(random_state=0).fit(X, X[:, 0] + rng.normal(size=1500))
    tree, leaves = model.tree_, _leaf_values(model, 0)
    x = X[0].astype(np.float32).astype(float)
    masks = rng.random((2048, 9)) < 0.5
    tracemalloc.start()
    got = path_dependent_values(tree, leaves, x, masks)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    np.testing.assert_allclose(got, _reference_tree_values(tree, leaves, x, masks), atol=1e-12)
    dense = tree.node_count * masks.shape[0] * 8  # what the 0.1 walk allocated: ~48 MiB here
    assert peak < 0.05 * dense, (peak, dense)


@pytest.mark.slow
def test_tree_game_peak_memory_target_on_a_25k_node_tree():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_tree_memory.py"
    spec = importlib.util.spec_from_file_location("bench_tree_memory", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result = bench.measure(rows=12_500, coalitions=16_384)
    assert result["nodes"] >= 24_000
    assert result["peak_mib"] < 100  # issue 30's target (0.1: ~790 MiB)


@pytest.mark.parametrize("sv", ["shapley", 0.2, (16, 1), (1, 4), (8, 8)])
def test_exact_tree_semivalue_matches_enumeration(sv):
    from adalina import exact_tree_semivalue
    from sklearn.datasets import load_diabetes
    from sklearn.ensemble import GradientBoostingRegressor, RandomForestClassifier

    X, y = load_diabetes(return_X_y=True)
    boosted = GradientBoostingRegressor(n_estimators=5, max_depth=4, random_state=0).fit(X, y)
    forest = RandomForestClassifier(n_estimators=3, max_depth=6, random_state=0)
    forest.fit(X, y > np.median(y))
    for model in (boosted, forest):
        game = TreeGame(model, X[5])
        expected = exact_semivalue(game, X.shape[1], sv)
        np.testing.assert_allclose(exact_tree_semivalue(game, sv), expected, atol=1e-10)
