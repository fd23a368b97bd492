import prism_matfn as pm
import pytest
import torch

scipy_linalg = pytest.importorskip("scipy.linalg")


def spd(n, cond, seed):
    g = torch.Generator().manual_seed(seed)
    Q, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))
    w = torch.logspace(-torch.log10(torch.tensor(cond)).item(), 0, n, dtype=torch.float64)
    return (Q * w) @ Q.T


@pytest.mark.parametrize("cond", [10.0, 1e4])
def test_sqrtm_and_inverse_against_scipy(cond):
    A = spd(24, cond, seed=int(cond))
    Y, Z, info = pm.sqrtm_and_inv(A, steps=30, tol=1e-12, return_info=True)
    expected = torch.from_numpy(scipy_linalg.sqrtm(A.numpy()).real)
    torch.testing.assert_close(Y, expected, atol=1e-8, rtol=0)
    torch.testing.assert_close(Y @ Y, A, atol=1e-9, rtol=0)
    I = torch.eye(24, dtype=torch.float64)
    torch.testing.assert_close(Z @ A @ Z, I, atol=1e-7, rtol=0)
    inv_expected = torch.from_numpy(scipy_linalg.inv(scipy_linalg.sqrtm(A.numpy()).real))
    torch.testing.assert_close(Z, inv_expected, atol=1e-6, rtol=1e-8)
    assert info.iterations < 30


def test_sqrtm_of_diagonal_is_elementwise():
    d = torch.tensor([1e-3, 0.1, 2.0, 50.0], dtype=torch.float64)
    torch.testing.assert_close(pm.sqrtm(torch.diag(d), steps=30), torch.diag(d.sqrt()))
    torch.testing.assert_close(pm.inv_sqrtm(torch.diag(d), steps=30), torch.diag(d.rsqrt()))


@pytest.mark.parametrize("p", [2, 4])
def test_inv_root_order_on_diagonal_matrices(p):
    # Guards against the silent M^{-1/2}-instead-of-M^{-1/4} bug seen in other Shampoo code.
    d = torch.tensor([0.01, 0.5, 3.0, 80.0], dtype=torch.float64)
    out = pm.inv_root(torch.diag(d), p, steps=30)
    torch.testing.assert_close(out, torch.diag(d ** (-1.0 / p)), atol=1e-10, rtol=1e-10)


def test_inv_root_matches_eigh_reference_and_reports_both_runs():
    A = spd(16, 100.0, seed=3)
    out, info = pm.inv_root(A, 4, steps=20, return_info=True)
    torch.testing.assert_close(out, pm.baselines.eigh_inv_root(A, 4), atol=1e-10, rtol=0)
    assert info.alphas.shape[0] == info.iterations == 40


def test_coupled_prism_needs_fewer_iterations_than_newton_schulz():
    A = spd(32, 1e4, seed=4)
    _, _, prism = pm.sqrtm_and_inv(A, steps=40, tol=1e-10, return_info=True)
    _, _, ns = pm.sqrtm_and_inv(A, steps=40, tol=1e-10, fit="fixed", alpha=0.375, return_info=True)
    assert prism.iterations < ns.iterations


def test_sign_of_symmetric_and_non_normal_matrices():
    g = torch.Generator().manual_seed(5)
    V = torch.randn(10, 10, generator=g, dtype=torch.float64) + 3 * torch.eye(
        10, dtype=torch.float64
    )
    lam = torch.tensor([-3.0, -1.0, -0.5, -0.2, 0.1, 0.3, 0.8, 1.5, 2.0, 4.0], dtype=torch.float64)
    A = V @ torch.diag(lam) @ torch.linalg.inv(V)
    S = pm.sign(A, steps=40, tol=1e-12)
    expected = V @ torch.diag(lam.sign()) @ torch.linalg.inv(V)
    torch.testing.assert_close(S, expected, atol=1e-8, rtol=0)
    torch.testing.assert_close(S @ S, torch.eye(10, dtype=torch.float64), atol=1e-8, rtol=0)
    Q, _ = torch.linalg.qr(V)
    B = (Q * lam) @ Q.T
    torch.testing.assert_close(
        pm.sign(B, steps=30, fit="exact"), (Q * lam.sign()) @ Q.T, atol=1e-10, rtol=0
    )


def test_sign_of_rotation_raises_convergence_error():
    with pytest.raises(pm.ConvergenceError, match="diverged"):
        pm.sign(torch.tensor([[0.0, -1.0], [1.0, 0.0]]), steps=8)


def test_batched_sqrtm_equals_looped():
    A = torch.stack([spd(8, 50.0, seed=s) for s in range(3)])
    Y = pm.sqrtm(A, steps=10)
    for b in range(3):
        torch.testing.assert_close(Y[b], pm.sqrtm(A[b], steps=10), atol=1e-12, rtol=0)
