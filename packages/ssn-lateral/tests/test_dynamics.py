import numpy as np
import pytest
import torch
from scipy.optimize import fsolve
from ssn_lateral import SSN, SSNParams
from ssn_lateral.dynamics import fixed_point_jacobian, rhs, rhs_jacobian
from ssn_testnets import TWO_POP, random_net, two_pop

# spec section 2.2, measured there with Euler dt = 0.5 ms warm-started along increasing c
TABLE = [
    (0.10, 0.0004, 0.0004),
    (1.04, 0.0452, 0.0456),
    (5.98, 2.025, 2.153),
    (10.73, 9.619, 11.155),
    (34.55, 60.81, 110.12),
    (111.2, 84.03, 262.18),
    (199.5, 78.02, 389.06),
]


def assert_close(actual, expected, *, rtol, atol):
    """``np.testing`` on tensors: torch.testing's first call costs seconds of imports."""
    np.testing.assert_allclose(
        torch.as_tensor(actual).numpy(), torch.as_tensor(expected).numpy(), rtol=rtol, atol=atol
    )


def sweep(net, contrasts, bias=None):
    """Warm-started steady states along increasing contrast."""
    if bias is not None:
        net.set_weights(b=torch.tensor(bias, dtype=torch.float64))
    x = torch.ones(1, 1, dtype=torch.float64)
    r, out = None, {}
    for c in contrasts:
        r = net.steady_state(x, contrast=float(c), r0=r)
        out[float(c)] = r[0].clone()
    return out


@pytest.fixture(scope="module")
def table_sweep():
    grid = np.unique(np.concatenate([np.geomspace(0.05, 250, 30), [row[0] for row in TABLE]]))
    return sweep(two_pop(), grid)


def test_no_recurrence_is_the_power_law_exactly():
    net = random_net(lateral=False)
    x = torch.randn(5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    h = net.drive(x, contrast=0.7)
    r = net.steady_state(x, contrast=0.7)
    assert torch.equal(r, 0.04 * torch.clamp(h, min=0) ** 2)
    # and the Euler solver with W = 0 reaches the same point
    lateral = random_net()
    for name in ("W_ee", "W_ei", "W_ie", "W_ii"):
        getattr(lateral, name).data.zero_()
    assert_close(lateral.steady_state(x, contrast=0.7), r, rtol=1e-8, atol=1e-9)


def test_fixed_point_residual_and_fsolve():
    # rates reach ~100 here: a relative tol of 1e-12 keeps the absolute residual below 1e-8
    net = random_net(params=SSNParams(dt=1.0, t_max=9000.0, tol=1e-12))
    x = torch.rand(3, 4, dtype=torch.float64) * 20
    r = net.steady_state(x)
    W, h = net.weight(), net.drive(x)
    F = 0.04 * torch.clamp(r @ W.T + h, min=0) ** 2
    assert float((F - r).abs().max()) < 1e-8
    Wn, hn = W.numpy(), h.numpy()
    for row in range(3):
        root = fsolve(
            lambda v, h=hn[row]: 0.04 * np.maximum(Wn @ v + h, 0) ** 2 - v, np.zeros(9), xtol=1e-13
        )
        np.testing.assert_allclose(r[row].numpy(), root, rtol=1e-7, atol=1e-10)


def test_two_population_table(table_sweep):
    for c, r_e, r_i in TABLE:
        r = table_sweep[c]
        np.testing.assert_allclose(r.numpy(), [r_e, r_i], rtol=0.01, atol=2e-6)


def test_isn_onset_between_6_and_10_7(table_sweep):
    net = two_pop()
    isn = {c: bool(net.is_isn(r[None])[0]) for c, r in table_sweep.items()}
    assert not any(v for c, v in isn.items() if c <= 5.98)
    assert all(v for c, v in isn.items() if c >= 10.73)
    # the closed form of the 2-population criterion, phi_E W_EE > 1
    for c, r in table_sweep.items():
        phi_e = 2 * 0.04**0.5 * float(r[0]) ** 0.5
        assert isn[c] == (phi_e * TWO_POP["W_ee"] > 1)
    # every fixed point of the table is stable (spec: max Re eig < 0)
    assert all(bool(net.is_stable(r[None])[0]) for r in table_sweep.values())


def test_spectral_abscissa_matches_table(table_sweep):
    net = two_pop()
    expected = {0.10: -0.0495, 10.73: -0.0151, 111.2: -0.1223}
    for c, value in expected.items():
        eig = torch.linalg.eigvals(net.jacobian(table_sweep[c][None])).real.max()
        assert float(eig) == pytest.approx(value, abs=6e-4)


def test_slopes_supralinear_then_supersaturating(table_sweep):
    grid = np.array(sorted(table_sweep))
    log_c = np.log(grid)
    log_r = np.log([float(table_sweep[c][0]) for c in grid])
    slope = np.gradient(log_r, log_c)
    assert slope[np.argmin(abs(grid - 0.1))] == pytest.approx(2.0, abs=0.05)
    assert slope[np.argmin(abs(grid - 200))] < 0
    assert slope.max() > 2.3  # the ISN range steepens before the sublinear turn


@pytest.mark.parametrize(("c", "delta", "paradoxical"), [(50.0, 1.0, True), (0.5, 0.1, False)])
def test_paradoxical_response(c, delta, paradoxical):
    base = sweep(two_pop(), np.geomspace(0.1, c, 12))[c]
    kicked = sweep(two_pop(), np.geomspace(0.1, c, 12), bias=[0.0, delta])[c]
    assert (float(kicked[1]) < float(base[1])) == paradoxical
    if c == 50.0:
        assert float(base[1]) == pytest.approx(149.38, rel=0.01)
        assert float(kicked[1]) == pytest.approx(140.70, rel=0.01)


def test_scaling_symmetry():
    net = random_net()
    x = torch.rand(4, 4, dtype=torch.float64) * 15
    r = net.steady_state(x)
    beta = 3.0
    scaled = random_net(params=SSNParams(k=0.04 * beta ** (1 - 2), dt=1.0, t_max=6000.0, tol=1e-10))
    r_beta = scaled.steady_state(beta * x)
    assert_close(r_beta, beta * r, rtol=1e-7, atol=1e-10)


def test_fixed_point_independent_of_tau():
    x = torch.rand(3, 4, dtype=torch.float64) * 15
    a = random_net(params=SSNParams(tau_e=20.0, tau_i=10.0, dt=1.0, t_max=6000.0, tol=1e-10))
    b = random_net(params=SSNParams(tau_e=12.0, tau_i=3.0, dt=1.0, t_max=6000.0, tol=1e-10))
    assert_close(a.steady_state(x), b.steady_state(x), rtol=1e-7, atol=1e-10)


def test_jacobian_against_autograd():
    net = random_net()
    x = torch.rand(2, 4, dtype=torch.float64) * 15
    r = net.steady_state(x)
    W, h, tau = net.weight(), net.drive(x), net.tau()
    J = net.jacobian(r)
    for row in range(2):
        auto = torch.autograd.functional.jacobian(
            lambda v, h=h[row : row + 1]: rhs(v[None], W, h, 0.04, 2.0, tau)[0], r[row]
        )
        assert_close(J[row], auto, rtol=1e-6, atol=1e-10)
    # away from a fixed point the drive-based Jacobian is the exact one
    r_any = torch.rand(2, 9, dtype=torch.float64) * 5
    J_any = rhs_jacobian(r_any, W, h, 0.04, 2.0, tau)
    auto = torch.autograd.functional.jacobian(
        lambda v: rhs(v[None], W, h[:1], 0.04, 2.0, tau)[0], r_any[0]
    )
    assert_close(J_any[0], auto, rtol=1e-6, atol=1e-12)
    assert not torch.allclose(fixed_point_jacobian(r_any, W, 0.04, 2.0, tau)[0], auto)


def test_uniform_network_has_the_two_population_fixed_point():
    # rows summing to the 2-population weights: uniform drive gives the 2-population rates
    net = random_net(n_e=8, n_i=4, n_in=1, signed_input=True)
    net.set_weights(
        Q_e=torch.ones(8, 1, dtype=torch.float64), Q_i=torch.ones(4, 1, dtype=torch.float64)
    )
    r = net.steady_state(torch.full((1, 1), 5.98, dtype=torch.float64))
    np.testing.assert_allclose(r[0, :8].numpy(), 2.025, rtol=0.01)
    np.testing.assert_allclose(r[0, 8:].numpy(), 2.153, rtol=0.01)


def test_batch_rows_are_independent_of_each_other():
    net = random_net()
    x = torch.rand(6, 4, dtype=torch.float64) * torch.tensor([[0.1], [1], [5], [10], [20], [30]])
    full = net.steady_state(x)
    for row in (0, 5):
        assert_close(net.steady_state(x[row : row + 1])[0], full[row], rtol=1e-13, atol=1e-18)


def test_simulate_reaches_the_steady_state_and_records():
    net = two_pop(SSNParams(dt=1.0, t_max=4000.0, tol=1e-10))
    x = torch.ones(1, 1, dtype=torch.float64)
    traj = net.simulate(x, 3000.0, contrast=5.98, record_every=10)
    assert traj.shape == (301, 1, 2)
    assert_close(traj[-1], net.steady_state(x, contrast=5.98), rtol=1e-6, atol=1e-8)
    assert torch.equal(traj[0], torch.zeros(1, 2, dtype=torch.float64))


def test_state_dict_round_trip_gives_identical_rates():
    net = random_net()
    other = SSN(6, 3, 4, net.params).double()
    other.load_state_dict(net.state_dict())
    x = torch.rand(3, 4, dtype=torch.float64) * 10
    assert torch.equal(other.steady_state(x), net.steady_state(x))
