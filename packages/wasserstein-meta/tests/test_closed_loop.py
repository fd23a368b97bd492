"""The plant, the adaptive law and its special cases, against an independent simulator."""

import math

import numpy as np
import pytest
import torch
import wasserstein_meta as wm
from helpers import assert_close
from wasserstein_meta.potentials import LpNorm, Quadratic, WassersteinBregman
from wasserstein_meta.simulate import TABLEAUX

PLANT = wm.systems.PFAR()
REFS = wm.trajectories.random_splines(2, T=2.0, knot_scale=0.7, seed=3)


def richards_oracle(plant, features, refs, winds, P, Lam, K, A0, T, dt):
    """The published law written out: Â̇ = P s yᵀ, u = B(φ)⁻¹(r̈ − Λė + g − Ây − Ks), RK4."""
    B = len(refs)
    n = round(T / dt)
    w = torch.as_tensor(winds)
    r0 = np.stack([r(0.0, 1)[:, 0] for r in refs], 1)  # (2, B, 3)
    q, dq = torch.as_tensor(r0[0]), torch.as_tensor(r0[1])
    A = A0.expand(B, *A0.shape).clone()
    g = torch.tensor([0.0, 9.81, 0.0])

    def f(t, q, dq, A):
        ref = torch.as_tensor(np.stack([r(t, 2)[:, 0] for r in refs], 1))
        e, de = q - ref[0], dq - ref[1]
        s = de + e @ Lam.T
        y = features(torch.cat([q, dq], -1))
        tau = ref[2] - de @ Lam.T + g - (A @ y.unsqueeze(-1)).squeeze(-1) - s @ K.T
        u = torch.linalg.solve(plant.input_matrix(q), tau)
        ddq = (plant.input_matrix(q) @ u.unsqueeze(-1)).squeeze(-1) + plant.wind_force(q, dq, w) - g
        dA = P @ s.unsqueeze(-1) @ y.unsqueeze(-2)
        return dq, ddq, dA

    for i in range(n):
        t = i * dt
        k1 = f(t, q, dq, A)
        k2 = f(t + dt / 2, q + dt / 2 * k1[0], dq + dt / 2 * k1[1], A + dt / 2 * k1[2])
        k3 = f(t + dt / 2, q + dt / 2 * k2[0], dq + dt / 2 * k2[1], A + dt / 2 * k2[2])
        k4 = f(t + dt, q + dt * k3[0], dq + dt * k3[1], A + dt * k3[2])
        q = q + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        dq = dq + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        A = A + dt / 6 * (k1[2] + 2 * k2[2] + 2 * k3[2] + k4[2])
    return q, dq, A


def _ctrl(potential, Gamma=1.0, seed=0, m=8):
    feats = wm.MLPFeatures(6, (m, m), init_std=0.3, seed=seed)
    gains = wm.PDGains(3, Lambda=torch.diag(torch.tensor([1.0, 2.0, 1.5])), K=5.0, Gamma=Gamma)
    return wm.AdaptiveController(PLANT, feats, potential, gains)


@torch.no_grad()
def _final(ctrl, T=1.0, dt=0.02):
    traj = wm.simulate(ctrl, PLANT, REFS, wind=[3.0, 7.0], T=T, dt=dt)
    return traj.q[:, -1], traj.dq[:, -1], traj.a_hat[:, -1]


def test_det_B_is_one_and_B_is_orthogonal():
    phi = torch.linspace(-math.pi, math.pi, 101)
    q = torch.stack([torch.zeros(101), torch.zeros(101), phi], -1)
    B = PLANT.input_matrix(q)
    assert_close(torch.linalg.det(B), torch.ones(101), atol=1e-14)
    tau = torch.randn(101, 3)
    assert_close(PLANT.solve_input(q, tau), torch.linalg.solve(B, tau), atol=1e-13)


def test_drag_sign_and_zero_relative_velocity():
    q = torch.tensor([[0.0, 0.0, 0.0], [1.0, 2.0, 0.4]])
    still = PLANT.wind_force(
        q, torch.tensor([[5.0, 0.0, 0.0], [2.0, 0.0, 0.3]]), torch.tensor([5.0, 2.0])
    )
    assert_close(still, torch.zeros(2, 3), atol=1e-15)
    push = PLANT.wind_force(q[:1], torch.tensor([[1.0, 0.0, 0.0]]), torch.tensor([4.0]))
    assert push[0, 0] > 0 and abs(push[0, 1]) < 1e-15  # wind faster than the vehicle pushes it on
    assert_close(push[0, 0], torch.tensor(0.1 * 9.0), atol=1e-14)  # β₁ v|v| with v = −3


def test_pvtol_drag():
    plant = wm.systems.PVTOL()
    q = torch.tensor([[0.0, 0.0, 0.2]])
    assert_close(
        plant.wind_force(q, torch.tensor([[3.0, 0.0, 0.0]]), torch.tensor([3.0])),
        torch.zeros(1, 3),
        atol=1e-15,
    )
    spin = plant.wind_force(q, torch.tensor([[3.0, 0.0, 1.0]]), torch.tensor([3.0]))
    assert spin[0, 2] < 0  # rotational drag opposes the spin: −β₃ (r²φ̇² + r²φ̇²)
    assert_close(spin[0, 2], torch.tensor(-2.0), atol=1e-14)
    hover = plant.acceleration(q * 0, q * 0, torch.tensor([[9.81, 0.0]]), torch.zeros(1, 3))
    assert_close(hover, torch.zeros(1, 3), atol=1e-15)


@torch.no_grad()
def test_no_wind_no_drag_tracks_within_integration_error():
    plant = wm.systems.PFAR(drag=(0.0, 0.0))
    ctrl = wm.AdaptiveController(plant, wm.ZeroFeatures(), None, wm.PDGains(3, 1.0, 1.0))
    errs = [
        float(
            wm.metrics.rms_tracking_error(
                wm.simulate(ctrl, plant, REFS, wind=0.0, T=2.0, dt=dt)
            ).max()
        )
        for dt in (0.04, 0.02)
    ]
    # The error dynamics are exactly e ≡ 0: what remains is RK4's O(dt⁴) error in integrating r.
    assert errs[1] < 1e-5 and errs[1] < errs[0] / 10


def test_quadratic_equals_published_euclidean_law():
    P = torch.tensor([[2.0, 0.3, 0.0], [0.3, 1.0, 0.1], [0.0, 0.1, 0.5]])
    ctrl = _ctrl(Quadratic(P))
    q, dq, A = _final(ctrl)
    gains = ctrl.gains
    ref = richards_oracle(
        PLANT,
        ctrl.features,
        REFS,
        [3.0, 7.0],
        P,
        gains.Lambda.detach(),
        gains.K.detach(),
        torch.zeros(3, 8),
        1.0,
        0.02,
    )
    for ours, theirs in zip((q, dq, A), ref, strict=False):
        assert_close(ours, theirs, atol=1e-10)


def test_wasserstein_primal_large_eps_is_euclidean_with_P_gamma_over_lambda():
    Gamma = torch.tensor([[2.0, 0.5, 0.0], [0.5, 1.0, 0.0], [0.0, 0.0, 3.0]])
    atoms = 0.5 * torch.randn(4, 24, generator=torch.Generator().manual_seed(0))
    ctrl = _ctrl(WassersteinBregman(atoms, eps=1e6, lam=0.5, Q=0.3, mode="primal"), Gamma=Gamma)
    q, dq, A = _final(ctrl)
    g = ctrl.gains
    ref = richards_oracle(
        PLANT,
        ctrl.features,
        REFS,
        [3.0, 7.0],
        Gamma / 0.5,
        g.Lambda.detach(),
        g.K.detach(),
        torch.zeros(3, 8),
        1.0,
        0.02,
    )
    for ours, theirs in zip((q, dq, A), ref, strict=False):
        assert_close(ours, theirs, atol=1e-5)


def test_wasserstein_dual_large_eps_is_euclidean_with_gain_lambda_gamma_from_barycentre():
    atoms = 0.5 * torch.randn(4, 24, generator=torch.Generator().manual_seed(0))
    pot = WassersteinBregman(atoms, eps=1e6, lam=0.5, Q=0.3, mode="dual")
    ctrl = _ctrl(pot, Gamma=2.0)
    q, dq, A = _final(ctrl)
    g = ctrl.gains
    # Â = L_Γ b̂ with L_Γ = √2 I; b̂(0) = ∇ψ(0) = Q·mean(atoms) as ε → ∞.
    A0 = math.sqrt(2.0) * 0.3 * atoms.mean(0).view(3, 8)
    ref = richards_oracle(
        PLANT,
        ctrl.features,
        REFS,
        [3.0, 7.0],
        0.5 * 2.0 * torch.eye(3),
        g.Lambda.detach(),
        g.K.detach(),
        A0,
        1.0,
        0.02,
    )
    for ours, theirs in zip((q, dq, A), ref, strict=False):
        assert_close(ours, theirs, atol=1e-5)


class LinearTask:
    """A disturbance exactly linear in the controller's features: f = A* y(q, q̇)."""

    n_models = 1

    def __init__(self, features, A_star):
        self.features, self.A_star = features, A_star

    def wind_of(self, index):
        return [float("nan")] * len(index)

    def force(self, index, q, dq):
        return (self.A_star @ self.features(torch.cat([q, dq], -1)).unsqueeze(-1)).squeeze(-1)


def _wb_atoms(A_star, scale, seed):
    gen = torch.Generator().manual_seed(seed)
    return A_star.reshape(1, -1) + scale * torch.randn(5, A_star.numel(), generator=gen)


@pytest.mark.parametrize(
    "make",
    [
        lambda A: Quadratic(torch.tensor([[2.0, 0.3, 0.0], [0.3, 1.0, 0.0], [0.0, 0.0, 0.5]])),
        lambda A: LpNorm(1.5, learnable=False),
        lambda A: LpNorm(3.0, learnable=False),
        lambda A: WassersteinBregman(_wb_atoms(A, 1.0, 1), eps=0.3, lam=0.5, Q=1.0, mode="dual"),
        lambda A: WassersteinBregman(_wb_atoms(A, 1.0, 1), eps=0.3, lam=0.5, Q=1.0, mode="primal"),
    ],
    ids=["quadratic", "lp1.5", "lp3", "wb-dual", "wb-primal"],
)
@torch.no_grad()
def test_lyapunov_function_never_increases(make):
    gen = torch.Generator().manual_seed(2)
    A_star = 2.0 * torch.randn(3, 8, generator=gen)
    ctrl = _ctrl(
        make(A_star), Gamma=torch.tensor([[1.5, 0.2, 0.0], [0.2, 1.0, 0.0], [0.0, 0.0, 0.8]])
    )
    task = LinearTask(ctrl.features, A_star)
    traj = wm.simulate(ctrl, PLANT, REFS, T=2.0, dt=0.01, ensemble=task)
    steps = len(traj.t)
    b_star = ctrl.to_potential_coords(A_star).expand(2 * steps, -1)
    D = ctrl.potential.lyapunov(b_star, traj.state.reshape(2 * steps, -1)).view(2, steps)
    V = 0.5 * (traj.s**2).sum(-1) + D
    assert float(V[:, 0].min()) > 0.1  # the law starts away from a*: the check is not vacuous
    assert float(torch.diff(V, dim=1).max()) <= 1e-6
    # V(0) − V(T) = ∫ sᵀKs dt (K = 5 I): the whole decrease is the dissipation, so ∫‖s‖² < ∞ and,
    # ṡ being bounded, ‖s‖ → 0 (Barbalat).
    dissipated = 5.0 * torch.trapezoid((traj.s**2).sum(-1), traj.t, dim=1)
    assert_close((V[:, 0] - V[:, -1]) / dissipated, torch.ones(2), atol=2e-3)


def test_integrators_agree_at_small_steps():
    ctrl = _ctrl(Quadratic())
    finals = {}
    for name in TABLEAUX:
        finals[name] = _final(ctrl, T=0.2, dt=0.01 if name != "euler" else 0.001)[0]
    for name in ("heun", "rk38", "euler"):
        assert_close(finals[name], finals["rk4"], atol=1e-3 if name == "euler" else 1e-5)
