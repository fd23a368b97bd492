import numpy as np
import pytest
from contrastive_sr import ContrastiveMetric, solve_transformation_matrix
from contrastive_sr.contrastive import contrastive_objective, psd_factor, solve_metric
from scipy.optimize import lsq_linear


def _ordered_system(Phi, r):
    n = len(r)
    B = np.array(
        [np.outer(Phi[i] - Phi[j], Phi[i] - Phi[j]).ravel() for i in range(n) for j in range(n)]
    )
    D = np.array([abs(r[i] - r[j]) for i in range(n) for j in range(n)])
    return B, D


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(30, 4)) * [1.0, 2.0, 0.5, 3.0] + 1.0, rng.normal(size=30)


def test_matches_lsq_linear_on_the_vectorised_system(data):
    Phi, r = data
    reg = 0.1
    B, D = _ordered_system(Phi, r)
    k = Phi.shape[1]
    A = np.vstack([B, np.sqrt(reg) * np.eye(k * k)])
    b = np.concatenate([D, np.zeros(k * k)])
    ref = lsq_linear(A, b, tol=1e-14, lsmr_tol="auto", lsq_solver="exact").x.reshape(k, k)
    np.testing.assert_allclose(solve_metric(Phi, r, reg), ref, atol=1e-8)


def test_objective_no_higher_than_identity_and_zero(data):
    Phi, r = data
    M = solve_metric(Phi, r, 0.1)
    f = contrastive_objective(M, Phi, r, 0.1)
    assert f <= contrastive_objective(np.eye(4), Phi, r, 0.1)
    assert f <= contrastive_objective(np.zeros((4, 4)), Phi, r, 0.1)


def test_w_wt_is_the_psd_projection():
    rng = np.random.default_rng(3)
    A = rng.normal(size=(5, 5))
    M = A + A.T  # indefinite
    vals, vecs = np.linalg.eigh(M)
    assert vals.min() < 0 < vals.max()
    W = psd_factor(M)
    np.testing.assert_allclose(W @ W.T, vecs @ np.diag(np.clip(vals, 0, None)) @ vecs.T, atol=1e-10)
    # and on a solved metric
    Phi, r = rng.normal(size=(30, 4)), rng.normal(size=30)
    S = solve_metric(Phi, r, 0.1)
    vals, vecs = np.linalg.eigh(S)
    W = psd_factor(S)
    np.testing.assert_allclose(W @ W.T, vecs @ np.diag(np.clip(vals, 0, None)) @ vecs.T, atol=1e-10)


def test_row_permutation_leaves_m_unchanged(data):
    Phi, r = data
    perm = np.random.default_rng(1).permutation(len(r))
    np.testing.assert_allclose(
        solve_metric(Phi[perm], r[perm], 0.1), solve_metric(Phi, r, 0.1), atol=1e-10
    )


def test_planted_psd_metric_is_recovered_as_reg_goes_to_zero():
    rng = np.random.default_rng(2)
    Phi = rng.normal(size=(25, 3))
    L = rng.normal(size=(3, 3))
    M0 = L @ L.T
    d = Phi[:, None, :] - Phi[None, :, :]
    targets = np.einsum("ija,ab,ijb->ij", d, M0, d)
    np.testing.assert_allclose(solve_metric(Phi, None, 1e-10, targets=targets), M0, atol=1e-7)
    # a larger λ shrinks it: the test can tell
    assert not np.allclose(solve_metric(Phi, None, 1e3, targets=targets), M0, atol=1e-2)


def test_transformation_falls_back_to_subsample_and_is_seeded(data):
    Phi, r = data
    a = solve_transformation_matrix(Phi, r, 0.1, 10, np.random.default_rng(0))
    b = solve_transformation_matrix(Phi, r, 0.1, 10, np.random.default_rng(0))
    c = solve_transformation_matrix(Phi, r, 0.1, 10, np.random.default_rng(1))
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_transformer_api(data):
    Phi, r = data
    est = ContrastiveMetric(random_state=0).fit(Phi, r)
    np.testing.assert_allclose(est.transform(Phi), Phi @ est.W_)
    np.testing.assert_allclose(est.metric_, est.W_ @ est.W_.T)
    with pytest.raises(ValueError, match="reg"):
        ContrastiveMetric(reg=-1.0).fit(Phi, r)
    with pytest.raises(ValueError, match="features"):
        est.transform(Phi[:, :2])
