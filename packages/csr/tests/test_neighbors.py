import numpy as np
import pytest
from contrastive_sr import LOOKNeighborsRegressor, linear_rank_weights
from contrastive_sr.neighbors import kneighbors, loo_predictions_all_k
from sklearn.neighbors import KNeighborsRegressor


def _brute_loo(X, y, k, weights):
    out = np.empty(len(y))
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        if weights == "uniform":
            model = KNeighborsRegressor(k, algorithm="brute").fit(X[keep], y[keep])
            out[i] = model.predict(X[i : i + 1])[0]
        else:
            d = np.linalg.norm(X[keep] - X[i], axis=1)
            out[i] = y[keep][np.argsort(d, kind="stable")[:k]] @ linear_rank_weights(k)
    return out


@pytest.mark.parametrize("weights", ["uniform", "linear_rank"])
def test_loo_every_k_equals_brute_force(weights):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 3)), rng.normal(size=40)
    idx = kneighbors(X, None, 12)
    loo = loo_predictions_all_k(y[idx], weights)
    for k in (1, 2, 5, 12):
        np.testing.assert_allclose(loo[:, k - 1], _brute_loo(X, y, k, weights), atol=1e-12)


def test_duplicates_stay_neighbours_exclusion_by_index():
    X = np.array([[0.0], [0.0], [5.0], [9.0]])
    idx = kneighbors(X, None, 1)
    # row 0's nearest other row is its duplicate row 1 (distance 0), not row 0 itself
    assert idx[0, 0] == 1 and idx[1, 0] == 0
    assert all(idx[i, 0] != i for i in range(4))


def test_linear_rank_weights():
    for k in (1, 2, 7, 30):
        w = linear_rank_weights(k)
        assert w.sum() == pytest.approx(1.0)
        assert np.all(np.diff(w) < 0) or k == 1
        np.testing.assert_allclose(np.diff(w), -w[-1])  # linear: constant decrement = the last
    assert linear_rank_weights(1)[0] == 1.0


def test_uniform_k_n_minus_1_is_mean_of_the_others():
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(15, 2)), rng.normal(size=15)
    loo = loo_predictions_all_k(y[kneighbors(X, None, 14)], "uniform")
    np.testing.assert_allclose(loo[:, -1], (y.sum() - y) / 14)


def test_regressor_selects_k_by_loo_and_predicts_like_sklearn():
    rng = np.random.default_rng(2)
    X = rng.uniform(-2, 2, size=(200, 2))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=200)
    model = LOOKNeighborsRegressor(k_max=30).fit(X, y)
    # brute force: sort every row's distances to the other rows, average the first K targets
    d = np.linalg.norm(X[:, None] - X[None], axis=2)
    np.fill_diagonal(d, np.inf)
    ranked = y[np.argsort(d, axis=1, kind="stable")]
    brute = [1 - np.mean((ranked[:, :k].mean(1) - y) ** 2) / np.var(y) for k in range(1, 31)]
    np.testing.assert_allclose(model.loo_r2_, brute, atol=1e-12)
    assert model.n_neighbors_ == int(np.argmax(brute)) + 1
    ref = KNeighborsRegressor(model.n_neighbors_, algorithm="brute").fit(X, y)
    Xq = rng.uniform(-2, 2, size=(20, 2))
    np.testing.assert_allclose(model.predict(Xq), ref.predict(Xq), atol=1e-12)


def test_pure_noise_falls_back_to_constant():
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(60, 3)), rng.normal(size=60)
    # targets independent of X and k_max small: no K beats the mean out of sample
    model = LOOKNeighborsRegressor(k_max=3).fit(X, y)
    assert model.loo_r2_.max() <= 0 and model.constant_
    np.testing.assert_allclose(model.predict(X[:5]), y.mean())
    assert not LOOKNeighborsRegressor(k_max=3, fallback_constant=False).fit(X, y).constant_


def test_k_max_clamped_with_warning_and_small_n_errors():
    X, y = np.arange(10.0).reshape(-1, 1), np.arange(10.0) ** 2
    with pytest.warns(UserWarning, match="clamped"):
        assert LOOKNeighborsRegressor(k_max=30).fit(X, y).loo_r2_.size == 9
    with pytest.raises(ValueError, match="n_samples=2"):
        LOOKNeighborsRegressor().fit(X[:2], y[:2])
    with pytest.raises(ValueError, match="weights"):
        LOOKNeighborsRegressor(weights="distance").fit(X, y)


def test_torch_backend_equals_numpy():
    pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    X, Q = rng.normal(size=(300, 5)), rng.normal(size=(50, 5))
    np.testing.assert_array_equal(kneighbors(X, None, 7), kneighbors(X, None, 7, backend="torch"))
    np.testing.assert_array_equal(kneighbors(X, Q, 7), kneighbors(X, Q, 7, backend="torch"))
    y = rng.normal(size=300)
    a = LOOKNeighborsRegressor().fit(X, y).predict(Q)
    b = LOOKNeighborsRegressor(backend="torch").fit(X, y).predict(Q)
    np.testing.assert_allclose(a, b, atol=1e-12)


def test_in_a_pipeline_on_raw_features():
    from contrastive_sr import ContrastiveMetric
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(5)
    X = rng.normal(size=(150, 8))
    y = 3 * X[:, 0] + 0.1 * rng.normal(size=150)
    pipe = make_pipeline(
        StandardScaler(), ContrastiveMetric(random_state=0), LOOKNeighborsRegressor()
    )
    plain = make_pipeline(StandardScaler(), LOOKNeighborsRegressor())
    # the metric learns that only x0 matters: its k-NN beats the plain one on the training LOO
    r2_metric = pipe.fit(X, y)[-1].loo_r2_.max()
    r2_plain = plain.fit(X, y)[-1].loo_r2_.max()
    assert r2_metric > r2_plain + 0.1
