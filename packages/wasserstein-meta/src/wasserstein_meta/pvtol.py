"""The PVTOL's differential-flatness tracking law with Lyapunov-gradient adaptation (base code,
``utils/pvtol.py`` and ``utils/simulation.py``), batched in torch.

The references are flat outputs ``z(t) = (x, y)`` with four derivatives. A tanh-saturated double
integrator on each of x and y gives the virtual accelerations ``v = z̈ − c · tanh(K (e, ė))``; the
thrust and attitude that realise them are ``u₁ = ‖(v_x, v_y + g)‖``, ``φ_des = atan(−v_x / (v_y + g))``,
and a PD law on φ (with the feed-forward ``φ̈_des``) gives ``u₂``. The Lyapunov function

    V = Σ_{i∈{x,y}} c_i · log cosh(K_i (e_i, ė_i)) + ½ k_i0 ė_i²  +  ½ (φ − φ_des, φ̇ − φ̇_des) Q (…)ᵀ

drives adaptation: ``u −= Â y`` with ``Â = L_Γ B̂`` and ``d/dt ∇ψ(b̂) = vec(L_Γᵀ Bᵀ∇_s V yᵀ)``, so the
Euclidean case is the base code's ``Â̇ = Γ Bᵀ ∇_s V yᵀ``. ``∇_s V`` is taken
(φ_des and φ̇_des depend on the state) by autograd, with ``create_graph`` under meta-training.
"""

from __future__ import annotations

import math
from typing import cast

import torch
from torch import nn

from wasserstein_meta.controller import AdaptiveController, ControlOutput
from wasserstein_meta.potentials import BregmanPotential
from wasserstein_meta.spd import SPDParameter
from wasserstein_meta.systems import GRAVITY

# v_y + g is the vertical thrust component the flatness map divides by: at or below zero the vehicle
# would have to fly upside down (u₁ → 0, φ_des flips). It is clamped to this floor, with a warning.
THRUST_FLOOR = 0.1


def _positive(value, name: str) -> torch.Tensor:
    t = torch.as_tensor(value, dtype=torch.float64).reshape(-1).expand(2).clone()
    if not (torch.isfinite(t).all() and (t > 0).all()):
        raise ValueError(f"{name} must be two positive gains, got {t.tolist()}")
    return t


class PVTOLGains(nn.Module):
    """kx, ky, kφ, cx, cy ∈ R²₊ (log parameters) with cy₀ + cy₁ < g, and the adaptation gain Γ ∈ S²₊₊.

    cy is stored as ``c ∈ R²₊`` with ``cy = g c / (1 + c₀ + c₁)``, the base code's map, so the
    constraint holds for every parameter value. The base code's nominal gains are all 1.
    """

    dim = 2

    def __init__(self, kx=1.0, ky=1.0, kphi=1.0, cx=1.0, cy=1.0, Gamma=1.0):
        super().__init__()
        cy_t = _positive(cy, "cy")
        if float(cy_t.sum()) >= GRAVITY:
            raise ValueError(f"cy must satisfy cy₀ + cy₁ < g = {GRAVITY}, got {cy_t.tolist()}")
        self.log_kx = nn.Parameter(_positive(kx, "kx").log())
        self.log_ky = nn.Parameter(_positive(ky, "ky").log())
        self.log_kphi = nn.Parameter(_positive(kphi, "kφ").log())
        self.log_cx = nn.Parameter(_positive(cx, "cx").log())
        self.log_cy = nn.Parameter((cy_t / (GRAVITY - cy_t.sum())).log())
        self.Gamma_ = SPDParameter(2, Gamma, "Γ")

    @property
    def Gamma(self) -> torch.Tensor:
        return self.Gamma_()

    def values(self) -> tuple[torch.Tensor, ...]:
        """``(kx, ky, kφ, cx, cy)``, each ``(2,)``."""
        c = self.log_cy.exp()
        cy = GRAVITY * c / (1 + c.sum())
        return self.log_kx.exp(), self.log_ky.exp(), self.log_kphi.exp(), self.log_cx.exp(), cy


def input_matrix(phi: torch.Tensor) -> torch.Tensor:
    """The acceleration rows of ``B(s)``, ``(B, 3, 2)``: thrust along the body's y-axis, torque on φ.
    Its columns are orthonormal, so ``Bᵀ`` is the base code's ``B_pseudo``."""
    c, s = torch.cos(phi), torch.sin(phi)
    zero, one = torch.zeros_like(phi), torch.ones_like(phi)
    return torch.stack([-s, zero, c, zero, zero, one], -1).view(*phi.shape, 3, 2)


def flat_to_state(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat outputs ``z (5, B, 2)`` (z … z⁽⁴⁾) to the reference state ``(B, 6)`` and input ``(B, 2)``."""
    wx, dwx, ddwx = -z[2, :, 0], -z[3, :, 0], -z[4, :, 0]
    wy, dwy, ddwy = z[2, :, 1] + GRAVITY, z[3, :, 1], z[4, :, 1]
    u1 = torch.sqrt(wx**2 + wy**2)
    phi = torch.atan(wx / wy)
    dphi = (dwx * wy - wx * dwy) / u1**2
    ddphi = (ddwx * wy - wx * ddwy - 2 * dphi * (wx * dwx + wy * dwy)) / u1**2
    state = torch.stack([z[0, :, 0], z[0, :, 1], phi, z[1, :, 0], z[1, :, 1], dphi], -1)
    return state, torch.stack([u1, ddphi], -1)


def flatness_feedback(
    state: torch.Tensor, gains: tuple[torch.Tensor, ...], z: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The nominal tracking law: ``(u (B, 2), V (B,), clamped (B,))`` for flat references ``z``.

    ``clamped`` marks entries where ``v_y + g`` fell to :data:`THRUST_FLOOR` (the singularity).
    """
    kx, ky, kphi, cx, cy = gains
    x, y, phi, dx, dy, dphi = state.unbind(-1)
    sin, cos = torch.sin(phi), torch.cos(phi)

    def saturated(k, c, e, de):
        # w = K (e, ė) with K = [[k₀, k₁], [0, k₁]]; returns w and the virtual acceleration term.
        w = torch.stack([k[0] * e + k[1] * de, k[1] * de], -1)
        return w, (c * torch.tanh(w)).sum(-1)

    ex, dex, ey, dey = x - z[0, :, 0], dx - z[1, :, 0], y - z[0, :, 1], dy - z[1, :, 1]
    wx, sx = saturated(kx, cx, ex, dex)
    wy, sy = saturated(ky, cy, ey, dey)
    vx, vy_g = z[2, :, 0] - sx, z[2, :, 1] - sy + GRAVITY
    clamped = vy_g <= THRUST_FLOOR
    vy_g = vy_g.clamp(min=THRUST_FLOOR)
    u1 = torch.sqrt(vx**2 + vy_g**2)
    phi_des = torch.atan(-vx / vy_g)
    # Nominal accelerations with the current attitude, then the derivatives of the virtual inputs.
    ddx, ddy = -u1 * sin, u1 * cos - GRAVITY

    def rate(k, c, w, de, dde):
        dw = torch.stack([k[0] * de + k[1] * dde, k[1] * dde], -1)
        return dw, (c * (1 - torch.tanh(w) ** 2) * dw).sum(-1)

    dwx, rx = rate(kx, cx, wx, dex, ddx - z[2, :, 0])
    dwy, ry = rate(ky, cy, wy, dey, ddy - z[2, :, 1])
    dvx, dvy = z[3, :, 0] - rx, z[3, :, 1] - ry
    du1 = (vx * dvx + vy_g * dvy) / u1
    dphi_des = (vx * dvy - dvx * vy_g) / u1**2
    d3x = -du1 * sin - u1 * dphi * cos
    d3y = du1 * cos - u1 * dphi * sin

    def accel(k, c, w, dw, dde, d3e):
        ddw = torch.stack([k[0] * dde + k[1] * d3e, k[1] * d3e], -1)
        t = torch.tanh(w)
        return (c * (-2 * t * (1 - t**2) * dw**2 + (1 - t**2) * ddw)).sum(-1)

    ddvx = z[4, :, 0] - accel(kx, cx, wx, dwx, ddx - z[2, :, 0], d3x - z[3, :, 0])
    ddvy = z[4, :, 1] - accel(ky, cy, wy, dwy, ddy - z[2, :, 1], d3y - z[3, :, 1])
    # The exact derivative of φ̇_des (the base code's `feedback`; its `corrected_feedback` puts the
    # state's φ̇ in the last term).
    ddphi_des = (vx * ddvy - ddvx * vy_g - 2 * dphi_des * (vx * dvx + vy_g * dvy)) / u1**2
    e_phi, de_phi = phi - phi_des, dphi - dphi_des
    u2 = ddphi_des - kphi[0] * e_phi - kphi[1] * de_phi
    V = (
        (cx * _log_cosh(wx)).sum(-1)
        + 0.5 * kx[0] * dex**2
        + (cy * _log_cosh(wy)).sum(-1)
        + 0.5 * ky[0] * dey**2
        + 0.5
        * (
            (kphi[0] * (kphi[0] + 1) + kphi[1] ** 2) * e_phi**2
            + 2 * kphi[1] * e_phi * de_phi
            + (kphi[0] + 1) * de_phi**2
        )
    )
    return torch.stack([u1, u2], -1), V, clamped


def _feedback_and_gradient(x: torch.Tensor, gains, z: torch.Tensor):
    """``(u, clamped, ∇_s V)``. Under meta-training the gradient keeps its graph (``create_graph``)
    to the state and the gains; a state that carries no graph becomes a leaf of its own. (Not
    ``torch.func.grad``: its first call imports torch._dynamo, a minute on a loaded machine.)"""
    outer = torch.is_grad_enabled()
    with torch.enable_grad():
        leaf = x if x.requires_grad else x.detach().requires_grad_(True)
        u, V, clamped = flatness_feedback(leaf, gains, z)
        (grad_V,) = torch.autograd.grad(V.sum(), leaf, create_graph=outer)
    return (u, clamped, grad_V) if outer else (u.detach(), clamped, grad_V)


def _log_cosh(x: torch.Tensor) -> torch.Tensor:
    # log cosh x = x + softplus(−2x) − log 2, finite for every x. Not through |x|: the second
    # derivative of abs is a ZeroTensor whose handling imports torch._dynamo (a minute under load).
    # softplus is linear beyond its threshold: 40 keeps that switch below e⁻⁴⁰ (20 gives 2e-9).
    return x + torch.nn.functional.softplus(-2 * x, threshold=40.0) - math.log(2.0)


class PVTOLController(AdaptiveController):
    """``PVTOLController(plant, features, potential, gains)``: the flatness law with adaptation.

    ``Â ∈ R^{2×m}`` acts on the inputs (thrust, angular acceleration); the adaptation geometry is any
    :class:`~wasserstein_meta.potentials.BregmanPotential`, as for the PFAR. References are
    two-coordinate flat-output splines (``trajectories.random_flat_splines``).
    """

    ref_derivs = 4
    compile_grad_limit = (
        "its control law takes the Lyapunov gradient with torch.autograd.grad(create_graph=True), "
        "and torch.compile (aot_autograd) does not support that double backward"
    )

    def __init__(
        self,
        plant,
        features: nn.Module | None = None,
        potential: BregmanPotential | None = None,
        gains: PVTOLGains | None = None,
    ):
        super().__init__(plant, features, potential, gains if gains is not None else PVTOLGains())

    def rollout_constants(self) -> tuple[torch.Tensor, ...]:
        return (self.gamma_factor(), *cast(PVTOLGains, self.gains).values())

    def initial_state(self, ref: torch.Tensor) -> torch.Tensor:
        return flat_to_state(ref)[0]

    def reference_state(self, ref: torch.Tensor) -> torch.Tensor:
        return flat_to_state(ref)[0]

    def adapted_force(self, q: torch.Tensor, force: torch.Tensor) -> torch.Tensor:
        """``Bᵀ f``: the part of a disturbance the inputs can cancel, in input coordinates."""
        return (input_matrix(q[..., 2]).transpose(-1, -2) @ force.unsqueeze(-1)).squeeze(-1)

    def control(self, q, dq, ref, state, L_gamma, *gains) -> ControlOutput:
        z = torch.stack(tuple(ref))
        x = torch.cat([q, dq], -1)
        u_nom, clamped, grad_V = _feedback_and_gradient(x, gains, z)
        B = input_matrix(q[..., 2])
        sigma = (B.transpose(-1, -2) @ grad_V[:, 3:].unsqueeze(-1)).squeeze(-1)  # Bᵀ ∇_s V
        y = self.features(x)
        a_hat = self.estimate(state, L_gamma)
        ay = (a_hat @ y.unsqueeze(-1)).squeeze(-1)
        s_ref, u_ref = flat_to_state(z)
        drive = ((sigma @ L_gamma).unsqueeze(-1) * y.unsqueeze(-2)).reshape(-1, self.n_params)
        u = u_nom - ay
        return ControlOutput(
            u=u,
            s=sigma,
            e=q - s_ref[:, :3],
            de=dq - s_ref[:, 3:],
            y=y,
            a_hat=a_hat,
            drive=drive,
            r=s_ref[:, :3],
            dr=s_ref[:, 3:],
            estimate=(B @ ay.unsqueeze(-1)).squeeze(-1),
            effort=((u - u_ref) ** 2).sum(-1),
            saturated=clamped,
        )
