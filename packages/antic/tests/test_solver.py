"""The vorticity and KdV solvers against conservation laws and closed forms."""

import math

import pytest
import torch
from antic_compress.data import (
    KdV1D,
    Vorticity2D,
    grid_coords,
    kdv_soliton,
    kolmogorov_flow,
    soliton,
)


def test_inviscid_unforced_conserves_energy_and_enstrophy():
    solver = Vorticity2D(n=32, nu=0.0, drag=0.0, forcing=None)
    s0 = solver.initial_state(seed=1)
    s1 = solver.advance(s0, 0.5)
    for quantity in (solver.energy, solver.enstrophy):
        drift = abs(quantity(s1) - quantity(s0)) / quantity(s0) / 0.5
        assert drift < 1e-6


def test_single_mode_decays_exactly():
    n, nu, k = 32, 0.05, 3
    solver = Vorticity2D(n=n, nu=nu, drag=0.0, forcing=None)
    x = torch.arange(n, dtype=torch.float64) * (2 * math.pi / n)
    w0 = torch.sin(k * x)[:, None].expand(n, n)  # w = sin(k x): u.grad(w) vanishes
    t = 0.7
    w = solver.field(solver.advance(solver.state_from_field(w0), t))
    assert torch.allclose(w, math.exp(-nu * k * k * t) * w0, atol=1e-10, rtol=0)


def test_kolmogorov_laminar_fixed_point_is_stationary():
    n, nu, drag, kf = 32, 0.05, 0.1, 4
    solver = Vorticity2D(n=n, nu=nu, drag=drag, forcing="kolmogorov", k_forcing=kf)
    y = torch.arange(n, dtype=torch.float64) * (2 * math.pi / n)
    w0 = -(kf / (nu * kf**2 + drag)) * torch.cos(kf * y)[None, :].expand(n, n)
    w = solver.field(solver.advance(solver.state_from_field(w0), 1.0))
    assert torch.allclose(w, w0, atol=1e-10, rtol=0)
    # a wrong amplitude is not stationary: the check can fail
    w_bad = solver.field(solver.advance(solver.state_from_field(1.1 * w0), 1.0))
    assert (w_bad - 1.1 * w0).abs().max() > 1e-3


def test_velocity_is_divergence_free():
    solver = Vorticity2D(n=32)
    state = solver.advance(solver.initial_state(seed=3), 0.2)
    assert solver.divergence(state).abs().max() < 1e-12


def test_forced_flow_generator_yields_frames_in_order():
    frames = list(kolmogorov_flow(n=16, T=0.2, save_every=0.05, dtype=torch.float32))
    assert [round(t, 6) for t, _ in frames] == [0.0, 0.05, 0.1, 0.15, 0.2]
    assert all(f.shape == (16, 16) and f.dtype == torch.float32 for _, f in frames)


def test_single_kdv_soliton_travels_at_its_speed():
    length, c = 40.0, 1.0
    solver = KdV1D(n=256, length=length)
    x = solver.x()
    u0 = soliton(x, c, 10.0, solver.alpha)
    u_hat = torch.fft.fft(u0)
    t, steps = 2.0, 400
    for _ in range(steps):
        u_hat = solver.step_hat(u_hat, t / steps)
    u = torch.fft.ifft(u_hat).real
    assert torch.allclose(u, soliton(x, c, 10.0 + c * t, solver.alpha), atol=5e-3)
    assert (u - u0).abs().max() > 0.1  # it moved


def test_kdv_generator_and_grid_coords():
    frames = list(kdv_soliton(n=64, T=0.1, save_every=0.05))
    assert len(frames) == 3 and frames[0][1].shape == (64,)
    c = grid_coords(4)
    assert c.shape == (16, 2) and float(c.max()) < 2 * math.pi


@pytest.mark.parametrize("kwargs", [dict(n=4), dict(nu=-1.0), dict(forcing="sine"), dict(dt=0.0)])
def test_solver_rejects_bad_settings(kwargs):
    with pytest.raises(ValueError):
        Vorticity2D(**kwargs)
