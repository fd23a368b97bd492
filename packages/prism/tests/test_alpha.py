import numpy as np
import pytest
import torch
from prism_matfn.alpha import (
    ALPHA_BOUNDS,
    CLASSIC_ALPHA,
    evaluate_residual_map,
    fit_alpha,
    krylov_gram,
    minimize_quartic,
    objective_coefficients,
    power_hankel,
)


def evaluate_quartic(q, alpha):
    return sum(q[..., k : k + 1] * alpha**k for k in range(5))


def spec_h(r, alpha, degree):
    """The residual maps as printed in the spec (section 2.2)."""
    if degree == 3:
        return (1 - 2 * alpha) * r + (2 * alpha - alpha**2) * r**2 + alpha**2 * r**3
    return 0.75 * r**2 + 0.25 * r**3 + alpha * (r**4 + r**3 - 2 * r**2) + alpha**2 * (r**5 - r**4)


def spec_quartic(t, degree):
    """c1..c4 as printed in the spec, from power traces t[j] = tr(R^j)."""
    if degree == 3:
        return [
            4 * t[3] - 4 * t[2],
            6 * t[4] - 10 * t[3] + 4 * t[2],
            4 * t[5] - 8 * t[4] + 4 * t[3],
            t[6] - 2 * t[5] + t[4],
        ]
    return [
        0.5 * t[7] + 2 * t[6] + 0.5 * t[5] - 3 * t[4],
        1.5 * t[8] + 3 * t[7] - 4.5 * t[6] - 4 * t[5] + 4 * t[4],
        2 * t[9] - 6 * t[7] + 4 * t[6],
        t[10] - 2 * t[9] + t[8],
    ]


def random_residual(n, seed, low=-0.3, high=1.0):
    g = torch.Generator().manual_seed(seed)
    Q, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))
    r = low + (high - low) * torch.rand(n, generator=g, dtype=torch.float64)
    return (Q * r) @ Q.T, r


@pytest.mark.parametrize("degree", [3, 5])
def test_residual_map_matches_the_update(degree):
    # h(r; α) = 1 − (1 − r) g(r)² is the residual after one step, for every r and α.
    r = torch.linspace(-0.3, 1.0, 50, dtype=torch.float64)
    for alpha in (0.2, 0.5, 1.3):
        g = 1 + alpha * r if degree == 3 else 1 + 0.5 * r + alpha * r**2
        direct = 1 - (1 - r) * g**2
        torch.testing.assert_close(evaluate_residual_map(r, alpha, degree), direct)
        torch.testing.assert_close(
            evaluate_residual_map(r, alpha, degree), spec_h(r, alpha, degree)
        )


@pytest.mark.parametrize("degree", [3, 5])
def test_quartic_coefficients_match_spec_formulas_and_expansion(degree):
    rng = np.random.default_rng(degree)
    r = torch.tensor(rng.uniform(-0.3, 1.0, 40))
    order = 3 if degree == 3 else 5
    q = objective_coefficients(power_hankel(r, order), degree)
    t = [float((r**j).sum()) for j in range(11)]
    np.testing.assert_allclose(q[1:].numpy(), spec_quartic(t, degree), rtol=1e-10, atol=1e-10)
    for alpha in rng.uniform(0, 2, 5):
        expanded = float((spec_h(r, alpha, degree) ** 2).sum())
        value = float(evaluate_quartic(q, torch.tensor([alpha], dtype=torch.float64))[0])
        assert value == pytest.approx(expanded, rel=1e-10)


@pytest.mark.parametrize("degree", [3, 5])
@pytest.mark.parametrize("seed", range(6))
def test_exact_fit_is_the_brute_force_argmin(degree, seed):
    R, r = random_residual(24, seed, low=-0.3 if seed % 2 else 0.0)
    lo, hi = ALPHA_BOUNDS[degree]
    alpha = float(fit_alpha(R, None, degree))
    grid = np.linspace(lo, hi, 10_000)
    values = evaluate_residual_map(r, torch.tensor(grid).unsqueeze(-1), degree)
    objective = (values**2).sum(-1).tolist()
    assert lo <= alpha <= hi
    best = grid[int(np.argmin(objective))]
    assert abs(alpha - best) < 1e-3
    at_alpha = float((evaluate_residual_map(r, alpha, degree) ** 2).sum())
    assert at_alpha <= min(objective[0], objective[-1]) + 1e-12
    assert at_alpha <= min(objective) + 1e-10


@pytest.mark.parametrize("degree", [3, 5])
def test_identity_sketch_equals_exact_fit(degree):
    R, _ = random_residual(16, 7)
    exact = fit_alpha(R, None, degree)
    sketched = fit_alpha(R, torch.eye(16, dtype=torch.float64), degree)
    assert float(sketched) == pytest.approx(float(exact), abs=1e-9)


def test_krylov_gram_of_symmetric_residual_is_the_trace_hankel():
    R, r = random_residual(12, 3)
    S = torch.eye(12, dtype=torch.float64)
    torch.testing.assert_close(krylov_gram(R, S, 5), power_hankel(r, 5))


def test_grid_solver_is_within_one_grid_step_of_exact():
    R, _ = random_residual(20, 11)
    exact = float(fit_alpha(R, None, 5))
    grid = float(fit_alpha(R, None, 5, solver="grid", grid_points=65))
    assert abs(exact - grid) <= (ALPHA_BOUNDS[5][1] - ALPHA_BOUNDS[5][0]) / 64


def test_minimize_quartic_degenerate_cases():
    bounds = (0.375, 1.45)
    # Flat objective (converged iterate): the classic coefficient.
    assert float(minimize_quartic(torch.zeros(5, dtype=torch.float64), bounds)) == 0.375
    # No quartic term: Q = (α − 0.9)² has its minimum inside.
    q = torch.tensor([0.81, -1.8, 1.0, 0.0, 0.0], dtype=torch.float64)
    assert float(minimize_quartic(q, bounds)) == pytest.approx(0.9, abs=1e-9)
    # Minimum outside: clamped to the bound.
    q = torch.tensor([0.0, -10.0, 1.0, 0.0, 0.0], dtype=torch.float64)
    assert float(minimize_quartic(q, bounds)) == pytest.approx(1.45)


def test_fitted_step_is_never_worse_than_classic():
    for seed in range(5):
        R, r = random_residual(30, seed)
        for degree in (3, 5):
            alpha = float(fit_alpha(R, None, degree))
            fitted = float(evaluate_residual_map(r, alpha, degree).norm())
            classic = float(evaluate_residual_map(r, CLASSIC_ALPHA[degree], degree).norm())
            assert fitted <= classic + 1e-12


def test_cpu_and_device_code_paths_agree():
    # minimize_quartic runs NumPy on the CPU and torch elsewhere; the torch path must give the same α.
    from prism_matfn.alpha import _grid_newton, _grid_torch

    g = torch.Generator().manual_seed(3)
    q = torch.randn(50, 5, generator=g, dtype=torch.float64)
    q[:, 4] = q[:, 4].abs()
    cpu = minimize_quartic(q, (0.375, 1.45))
    grid, powers = _grid_torch(0.375, 1.45, 65, q.device)
    torch_path = _grid_newton(torch, q, grid, powers, 0.375, 1.45, True)
    torch.testing.assert_close(cpu, torch_path, atol=1e-12, rtol=0)


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("batch", [1, 3])
def test_krylov_rows_from_the_square_equal_the_plain_powers(symmetric, batch):
    """Rows two at a time from R² (the PRISM loop's path) equal ⟨RⁱS, RʲS⟩ from explicit powers."""
    from prism_matfn.alpha import KrylovRows

    g = torch.Generator().manual_seed(4)
    R = torch.randn(batch, 9, 9, generator=g, dtype=torch.float64) / 3
    if symmetric:
        R = (R + R.mT) / 2
    S = torch.randn(batch, 9, 4, generator=g, dtype=torch.float64)
    powers = [S]
    for _ in range(5):
        powers.append(R @ powers[-1])
    V = torch.stack([v.flatten(-2) for v in powers], dim=-2)
    expected = V @ V.mT
    for order in (3, 5):
        for squared in (None, R @ R):
            rows = KrylovRows(S, batch, order, R.dtype, squared is not None, symmetric)
            got = rows.gram(R, squared)
            torch.testing.assert_close(got, expected[:, : order + 1, : order + 1])
            again = rows.gram(R, squared)  # the buffer is reused: same answer on a second call
            torch.testing.assert_close(again, got, atol=0, rtol=0)


def test_cpu_alpha_from_the_buffer_matches_the_torch_gram_path():
    """KrylovRows.alpha's NumPy arithmetic on the CPU equals fit_alpha's torch Gram + quartic."""
    from prism_matfn.alpha import KrylovRows, alpha_from_gram

    g = torch.Generator().manual_seed(5)
    for batch in (1, 6):  # Python-float and NumPy Newton steps
        R, _ = random_residual(12, 7)
        R = R.float().expand(batch, 12, 12) * torch.linspace(0.5, 1.0, batch)[:, None, None]
        S = torch.randn(batch, 12, 3, generator=g)
        rows = KrylovRows(S, batch, 5, R.dtype, True, True)
        fast = rows.alpha(R, R @ R, 5, ALPHA_BOUNDS[5])
        reference = alpha_from_gram(krylov_gram(R, S, 5), 5, ALPHA_BOUNDS[5], "exact", 65)
        torch.testing.assert_close(fast, reference, atol=1e-4, rtol=0)


def _residuals_of_conditioning(conditions, n=16, m=40, seed=11):
    """``R = I − XXᵀ`` for ``X`` with singular values log-spaced over each condition number."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for cond in conditions:
        U, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))
        V, _ = torch.linalg.qr(torch.randn(m, n, generator=g, dtype=torch.float64))
        sigma = torch.logspace(-np.log10(cond), 0, n, dtype=torch.float64)
        X = U @ torch.diag(sigma) @ V.mT
        out.append(torch.eye(n, dtype=torch.float64) - X @ X.mT)
    return torch.stack(out)


@pytest.mark.parametrize("solver", ["exact", "grid"])
@pytest.mark.parametrize("conditions", [(1.2, 2.0, 1e4), (1.05, 1.5, 3.0, 1e2, 1e6, 1.0)])
def test_batched_host_fit_equals_the_per_matrix_fit(conditions, solver):
    """One batched fit (rows, Grams, quartics and minima of the whole batch in one call) gives each
    matrix the α of fitting it alone with :func:`fit_alpha`, for a batch mixing conditionings
    (Python-float path for ≤ 4 matrices, NumPy for more; cond 1 is a converged R = 0: α = lo)."""
    from prism_matfn.alpha import KrylovRows

    R = _residuals_of_conditioning(conditions)
    batch, n = len(R), R.shape[-1]
    S = torch.randn(batch, n, 5, generator=torch.Generator().manual_seed(12), dtype=torch.float64)
    bounds = ALPHA_BOUNDS[5]
    rows = KrylovRows(S, batch, 5, R.dtype, True, True)
    batched = rows.alpha_host(R, R @ R, 5, bounds, solver)
    alone = [float(fit_alpha(R[i], S[i], 5, bounds=bounds, solver=solver)) for i in range(batch)]
    np.testing.assert_allclose(batched, alone, rtol=0, atol=1e-12)
    assert len(set(np.round(alone, 6))) >= 3  # the batch really mixes different fits
    if conditions[-1] == 1.0:
        assert alone[-1] == bounds[0]
