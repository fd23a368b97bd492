import prism_matfn as pm
import pytest
import torch

scipy_linalg = pytest.importorskip("scipy.linalg")


# Amsel et al. (2025), NoahAmsel/PolarExpress `optimal_composition(l=1e-3, num_iters=10,
# safety_factor_eps=1e-2, cushion=0.02)`, printed to 6 decimals from the authors' code.
PUBLISHED_POLAR_EXPRESS = [
    (8.237312, -23.157747, 16.680568),
    (4.082442, -2.893048, 0.525285),
    (3.926348, -2.854747, 0.531802),
    (3.298219, -2.424542, 0.486320),
    (2.297037, -1.636626, 0.400263),
    (1.876381, -1.234790, 0.358919),
    (1.856442, -1.213245, 0.356800),
    (1.856437, -1.213240, 0.356801),
    (1.856431, -1.213229, 0.356795),
    (1.874995, -1.249991, 0.374995),
]


def test_polar_express_coefficients_match_the_published_recipe():
    coeffs = pm.baselines.polar_express_coefficients()
    assert len(coeffs) == len(PUBLISHED_POLAR_EXPRESS)
    for ours, published in zip(coeffs, PUBLISHED_POLAR_EXPRESS, strict=True):
        # 2e-5: the Remez iteration stops at |ΔE| ≤ 1e-15, and near-converged steps are ill-posed
        assert ours == pytest.approx(published, abs=2e-5)


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
