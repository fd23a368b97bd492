import math

import prism_matfn as pm
import pytest
import torch
from prism_matfn.alpha import CLASSIC_ALPHA

scipy_linalg = pytest.importorskip("scipy.linalg")


def with_spectrum(m, n, s, seed=0):
    g = torch.Generator().manual_seed(seed)
    U, _ = torch.linalg.qr(torch.randn(m, len(s), generator=g, dtype=torch.float64))
    V, _ = torch.linalg.qr(torch.randn(n, len(s), generator=g, dtype=torch.float64))
    return (U * torch.as_tensor(s, dtype=torch.float64)) @ V.T, U, V


@pytest.mark.parametrize("shape", [(40, 16), (16, 40), (24, 24)])
def test_polar_matches_svd_and_scipy(shape):
    k = min(shape)
    s = torch.logspace(-2, 0, k, dtype=torch.float64)
    G, _, _ = with_spectrum(*shape, s, seed=sum(shape))
    X = pm.polar(G, steps=12)
    torch.testing.assert_close(X, pm.baselines.svd_polar(G), atol=1e-6, rtol=0)
    expected = (
        scipy_linalg.polar(G.numpy())[0]
        if shape[0] >= shape[1]
        else scipy_linalg.polar(G.numpy().T)[0].T
    )
    assert (X - torch.from_numpy(expected)).abs().max() < 1e-6
    assert float(pm.residual(X)) < 1e-8


@pytest.mark.parametrize("fit", ["sketch", "exact"])
@pytest.mark.parametrize("degree", [3, 5])
def test_unitary_invariance_replay(fit, degree):
    # Every iterate is U diag(s_k) Vᵀ with s_{k+1} = s_k g(1 − s_k²; α_k): replaying the returned α on
    # the singular values alone must reproduce the matrix run, sketched or not.
    s = torch.linspace(0.01, 1.0, 12, dtype=torch.float64) ** 2
    G, U, V = with_spectrum(30, 12, s, seed=degree)
    X, info = pm.polar(G, steps=4, degree=degree, fit=fit, return_info=True)
    sk = s / s.norm()
    for alpha in info.alphas.tolist():
        r = 1 - sk**2
        sk = sk * ((1 + alpha * r) if degree == 3 else (1 + 0.5 * r + alpha * r**2))
    torch.testing.assert_close(X, (U * sk) @ V.T, atol=1e-12, rtol=0)
    torch.testing.assert_close(
        info.residual_fro[-1], torch.linalg.vector_norm(1 - sk**2), atol=1e-12, rtol=0
    )
    assert info.residual_rms[-1] < info.residual_rms[0]


def test_fixed_quintic_alpha_is_newton_schulz_to_round_off():
    G = torch.randn(20, 9, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    X = pm.polar(G, steps=4, fit="fixed", alpha=CLASSIC_ALPHA[5])
    Y = G / G.abs().max()  # the scale-safe normalisation: peak first, then the Frobenius norm
    Y = Y / torch.linalg.matrix_norm(Y)
    I = torch.eye(9, dtype=torch.float64)
    for _ in range(4):  # the residual form: T = I + R/2 + αR², R = I − YᵀY
        R = I - Y.T @ Y
        Y = Y @ (R * 0.5 + 0.375 * (R @ R) + I)
    # PRISM now runs Muon's addmm form (aI + bA + cA², A = X Xᵀ): the same polynomial to round-off
    torch.testing.assert_close(X, Y, atol=1e-14, rtol=0)
    # and the textbook form X(15I − 10XᵀX + 3(XᵀX)²)/8 to round-off
    Y = G / torch.linalg.matrix_norm(G)
    for _ in range(4):
        A = Y.T @ Y
        Y = Y @ (15 * I - 10 * A + 3 * A @ A) / 8
    torch.testing.assert_close(X, Y, atol=1e-14, rtol=0)


def test_fixed_cubic_alpha_is_classic_newton_schulz():
    G = torch.randn(9, 20, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    X = pm.polar(G, steps=6, degree=3, fit="fixed", alpha=0.5)
    Y = (G / torch.linalg.matrix_norm(G)).T
    I = torch.eye(9, dtype=torch.float64)
    for _ in range(6):
        Y = Y @ (3 * I - Y.T @ Y) / 2
    torch.testing.assert_close(X, Y.T, atol=1e-14, rtol=0)
    torch.testing.assert_close(X, pm.baselines.newton_schulz(G, 6, "classic"), atol=1e-14, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_scale_and_transpose_equivariance(dtype):
    G = torch.randn(30, 10, generator=torch.Generator().manual_seed(3)).to(dtype)
    X = pm.polar(G, steps=8)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(pm.polar(G.T, steps=8), X.T, atol=tol, rtol=0)
    scales = (1e-30, 1e-20, 3.0, 1e20) if dtype == torch.float32 else (1e-30, 1e-200, 1e200)
    for c in scales:
        Xc = pm.polar(G * c, steps=8)
        assert torch.isfinite(Xc).all()
        torch.testing.assert_close(Xc, X, atol=tol, rtol=0)


def test_orthogonal_equivariance_with_exact_fit():
    g = torch.Generator().manual_seed(4)
    G = torch.randn(25, 10, generator=g, dtype=torch.float64)
    Q, _ = torch.linalg.qr(torch.randn(25, 25, generator=g, dtype=torch.float64))
    torch.testing.assert_close(
        pm.polar(Q @ G, steps=5, fit="exact"),
        Q @ pm.polar(G, steps=5, fit="exact"),
        atol=1e-12,
        rtol=0,
    )


def test_batched_equals_looped():
    G = torch.randn(3, 2, 20, 12, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    X, info = pm.polar(G, steps=5, return_info=True)
    assert info.alphas.shape == (5, 3, 2) and info.residual_fro.shape == (6, 3, 2)
    for i in range(3):
        for j in range(2):
            Xij, info_ij = pm.polar(G[i, j], steps=5, return_info=True)
            torch.testing.assert_close(X[i, j], Xij, atol=1e-13, rtol=0)
            torch.testing.assert_close(info.alphas[:, i, j], info_ij.alphas, atol=1e-12, rtol=0)


def test_tol_stops_early_and_sketch_is_seeded():
    G = torch.randn(64, 16, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    X, info = pm.polar(G, steps=30, tol=1e-6, return_info=True)
    assert info.iterations < 30
    assert float(info.residual_rms[-1]) <= 1e-6
    assert float(pm.residual(X)) / 4 <= 1e-6
    # the default sketch is seeded: same α twice; another seed changes them
    a1 = pm.polar(G, steps=3, return_info=True)[1].alphas
    a2 = pm.polar(G, steps=3, return_info=True)[1].alphas
    a3 = pm.polar(G, steps=3, sketch_seed=1, return_info=True)[1].alphas
    assert torch.equal(a1, a2) and not torch.equal(a1, a3)


def test_prism5_beats_newton_schulz_at_five_steps():
    G = torch.randn(256, 64, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    _, prism = pm.polar(G, steps=5, return_info=True)
    _, ns = pm.baselines.newton_schulz(G, 5, "quintic", return_info=True)
    assert float(prism.residual_rms[-1]) < 0.1 * float(ns.residual_rms[-1])


def test_half_and_integer_inputs_cast_back():
    G = torch.randn(16, 8, generator=torch.Generator().manual_seed(8))
    out = pm.polar(G.half(), steps=8)
    assert out.dtype == torch.float16
    assert float(pm.residual(out.float())) < 1e-2
    assert pm.polar(torch.arange(12).reshape(4, 3), steps=10).dtype == torch.float32


def test_rank_deficient_gives_partial_isometry_and_warns_on_tol():
    G, U, V = with_spectrum(20, 8, [1.0, 0.5, 0.3, 0.2], seed=9)
    with pytest.warns(RuntimeWarning, match="did not reach tol"):
        X = pm.polar(G, steps=15, tol=1e-10)
    torch.testing.assert_close(X, U @ V.T, atol=1e-8, rtol=0)


def test_zeropower_via_prism_is_polar():
    G = torch.randn(12, 30, generator=torch.Generator().manual_seed(10))
    torch.testing.assert_close(pm.zeropower_via_prism(G, 5), pm.polar(G, steps=5))
    assert math.isclose(float(pm.residual(pm.zeropower_via_prism(G, 10))), 0, abs_tol=1e-4)


def test_grid_solver_and_explicit_sketch_converge():
    G = torch.randn(80, 20, generator=torch.Generator().manual_seed(11), dtype=torch.float64)
    X = pm.polar(G, steps=12, alpha_solver="grid")
    torch.testing.assert_close(X, pm.baselines.svd_polar(G), atol=1e-8, rtol=0)
    S = torch.randn(20, 4, generator=torch.Generator().manual_seed(12), dtype=torch.float64)
    _, info = pm.polar(G, steps=6, sketch=S, return_info=True)
    _, again = pm.polar(G, steps=6, sketch=S, return_info=True)
    assert torch.equal(info.alphas, again.alphas)
    lo, hi = pm.ALPHA_BOUNDS[5]
    assert bool(((info.alphas >= lo) & (info.alphas <= hi)).all())


def test_half_precision_compute_dtype():
    G = torch.randn(64, 16, generator=torch.Generator().manual_seed(13)) * 300.0
    X = pm.polar(G, steps=8, compute_dtype=torch.float16)
    assert X.dtype == torch.float32 and torch.isfinite(X).all()
    assert float(pm.residual(X)) / 4 < 5e-2  # float16 round-off, not convergence, limits it


def test_spectral_rescale_converges_faster_on_spread_spectra():
    G = torch.randn(96, 96, generator=torch.Generator().manual_seed(14), dtype=torch.float64)
    X, info = pm.polar(G, steps=30, tol=1e-8, spectral_rescale=True, return_info=True)
    _, plain = pm.polar(G, steps=30, tol=1e-8, return_info=True)
    torch.testing.assert_close(X, pm.baselines.svd_polar(G), atol=1e-6, rtol=0)
    assert info.iterations < plain.iterations
    # the first residual shows the rescale: σ_max starts near 2/3 instead of ≈ 2/√n
    assert float(info.residual_rms[0]) < float(plain.residual_rms[0])
    with pytest.raises(ValueError, match="polar only"):
        pm.sign(torch.eye(3), spectral_rescale=True)
