import prism_matfn as pm
import pytest
import torch

scipy_linalg = pytest.importorskip("scipy.linalg")


def test_polar_express_first_coefficients_match_the_paper():
    # Amsel et al. (2025), the published list for ℓ = 1e-3, safety 1.01, cushion 0.02.
    coeffs = pm.baselines.polar_express_coefficients()
    assert len(coeffs) == 10
    assert coeffs[0] == pytest.approx((8.2373, -23.1577, 16.6806), abs=1e-3)
    assert coeffs[1] == pytest.approx((4.0824, -2.8930, 0.5253), abs=1e-3)
    # the composition maps [1e-3, 1] close to 1: the last polynomial is (nearly) the NS quintic
    a, b, c = coeffs[-1]
    assert a + b + c == pytest.approx(1.0, abs=1e-2)


@pytest.mark.parametrize("coeffs", ["quintic", "classic"])
def test_newton_schulz_converges_to_svd_polar(coeffs):
    G = torch.randn(40, 12, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    X, info = pm.baselines.newton_schulz(G, 30, coeffs, tol=1e-12, return_info=True)
    torch.testing.assert_close(X, pm.baselines.svd_polar(G), atol=1e-9, rtol=0)
    assert info.iterations < 30 and info.alphas.numel() == 0


def test_polar_express_converges_and_muon_does_not():
    G = torch.randn(64, 16, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    X = pm.baselines.polar_express(G, 12)
    torch.testing.assert_close(X, pm.baselines.svd_polar(G), atol=1e-6, rtol=0)
    # Muon's coefficients trade convergence for speed: σ stay spread around 1 (about 0.7..1.2).
    s = torch.linalg.svdvals(pm.baselines.newton_schulz(G, 12, "muon"))
    assert 0.5 < float(s.min()) < 0.95 and 1.05 < float(s.max()) < 1.5


def test_eigh_inv_root_matches_scipy_fractional_power():
    g = torch.Generator().manual_seed(2)
    B = torch.randn(10, 10, generator=g, dtype=torch.float64)
    A = B @ B.T + 0.1 * torch.eye(10, dtype=torch.float64)
    for p in (2, 4):
        expected = scipy_linalg.fractional_matrix_power(A.numpy(), -1.0 / p).real
        torch.testing.assert_close(pm.baselines.eigh_inv_root(A, p), torch.from_numpy(expected))
