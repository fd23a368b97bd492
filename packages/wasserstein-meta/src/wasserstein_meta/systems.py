"""The two plants of the paper: the planar fully-actuated rotorcraft (PFAR) and the PVTOL.

Both follow the base code (``utils/dynamics.py``, ``utils/pvtol.py``): a rigid planar body in a wind
``w`` blowing along inertial x, with quadratic body-frame drag. Tensors are batched: ``q`` is
``(B, 3)`` = (x, y, φ), ``wind`` is ``(B,)``.
"""

from __future__ import annotations

import functools

import torch

GRAVITY = 9.81


def rotation(phi: torch.Tensor) -> torch.Tensor:
    """``R(φ)``, ``(B, 2, 2)``: body frame to inertial frame."""
    c, s = torch.cos(phi), torch.sin(phi)
    return torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)


def body_air_velocity(phi: torch.Tensor, dq: torch.Tensor, wind: torch.Tensor) -> torch.Tensor:
    """``v = R(φ)ᵀ (ẋ − w, ẏ)``: the air velocity relative to the body, in the body frame."""
    rel = torch.stack([dq[..., 0] - wind, dq[..., 1]], -1)
    return (rotation(phi).transpose(-1, -2) @ rel.unsqueeze(-1)).squeeze(-1)


@functools.cache
def _cached_constant(
    values: tuple[float, ...], dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype, device=device)


def _constant(values: tuple[float, ...], like: torch.Tensor) -> torch.Tensor:
    """A small constant tensor with ``like``'s dtype and device, built once per (dtype, device):
    the closed loop asks for it at every stage (a fresh ``torch.tensor`` each time was ~5 % of a
    PFAR meta-step). Under ``torch.compile`` it is built in the graph instead (Dynamo would trace
    through the cache with a warning; the compiled graph holds the constant anyway)."""
    if torch.compiler.is_compiling():
        return torch.tensor(values, dtype=like.dtype, device=like.device)
    return _cached_constant(values, like.dtype, like.device)


def _check_drag(drag: tuple[float, ...], n: int) -> tuple[float, ...]:
    drag = tuple(float(b) for b in drag)
    if len(drag) != n or any(not b >= 0 for b in drag):
        raise ValueError(f"drag must be {n} non-negative coefficients, got {drag}")
    return drag


class PFAR:
    """Planar fully-actuated rotorcraft: ``H q̈ + C q̇ + g = B(φ) u + f_ext`` with H = I, C = 0.

    ``B(φ) = [[−sinφ, 0, cosφ], [cosφ, 0, sinφ], [0, 1, 0]]`` has determinant 1 for every φ. The wind
    force is ``f_ext = −[R(φ)(β ⊙ v ⊙ |v|); 0]`` with ``v`` the body-frame air velocity.
    """

    dim = 3
    state_dim = 6

    def __init__(self, drag: tuple[float, float] = (0.1, 1.0)):
        self.drag = _check_drag(drag, 2)

    def __repr__(self) -> str:
        return f"PFAR(drag={self.drag})"

    fully_actuated = True

    def gravity(self, q: torch.Tensor) -> torch.Tensor:
        return _constant((0.0, GRAVITY, 0.0), q)

    def input_matrix(self, q: torch.Tensor) -> torch.Tensor:
        """``B(φ)``, ``(B, 3, 3)``: orthogonal, so ``B⁻¹ = Bᵀ``."""
        phi = q[..., 2]
        c, s = torch.cos(phi), torch.sin(phi)
        zero, one = torch.zeros_like(phi), torch.ones_like(phi)
        return torch.stack([-s, zero, c, c, zero, s, zero, one, zero], -1).view(*phi.shape, 3, 3)

    def solve_input(self, q: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        """``u = B(φ)⁻¹ τ = B(φ)ᵀ τ`` (the columns of B are orthonormal)."""
        phi = q[..., 2]
        c, s = torch.cos(phi), torch.sin(phi)
        tx, ty, tphi = tau.unbind(-1)
        return torch.stack([c * ty - s * tx, tphi, c * tx + s * ty], -1)

    def wind_force(self, q: torch.Tensor, dq: torch.Tensor, wind: torch.Tensor) -> torch.Tensor:
        """``f_ext(q, q̇; w)``, ``(B, 3)``."""
        phi = q[..., 2]
        c, s = torch.cos(phi), torch.sin(phi)
        rx, ry = dq[..., 0] - wind, dq[..., 1]
        vx, vy = c * rx + s * ry, c * ry - s * rx  # v = R(φ)ᵀ (ẋ − w, ẏ)
        dx, dy = -self.drag[0] * vx * vx.abs(), -self.drag[1] * vy * vy.abs()
        return torch.stack([c * dx - s * dy, s * dx + c * dy, torch.zeros_like(phi)], -1)

    def acceleration(
        self, q: torch.Tensor, dq: torch.Tensor, u: torch.Tensor, f_ext: torch.Tensor
    ) -> torch.Tensor:
        """``q̈ = H⁻¹(B u + f_ext − C q̇ − g)`` (H = I, C = 0)."""
        phi = q[..., 2]
        c, s = torch.cos(phi), torch.sin(phi)
        u1, u2, u3 = u.unbind(-1)
        Bu = torch.stack([c * u3 - s * u1, c * u1 + s * u3, u2], -1)
        return Bu + f_ext - self.gravity(q)


class PVTOL:
    """Planar vertical take-off and landing vehicle (underactuated), ``s = (x, y, φ, ẋ, ẏ, φ̇)``.

    ``ṡ = (ẋ, ẏ, φ̇, −u₁ sinφ, u₁ cosφ − g, u₂) + f_ext`` with u₁ the mass-normalised thrust, u₂ the
    angular acceleration. Drag: body linear ``d_b = −β₁:₂ ⊙ v ⊙ |v|`` rotated to the inertial frame,
    and rotational ``d_φ = −β₃ (v_R|v_R| − v_L|v_L|)`` with ``v_R = rφ̇ − v_y``, ``v_L = −rφ̇ − v_y``.
    """

    dim = 3
    state_dim = 6
    input_dim = 2

    def __init__(self, drag: tuple[float, float, float] = (0.01, 1.0, 1.0), arm: float = 1.0):
        self.drag = _check_drag(drag, 3)
        if not arm > 0:
            raise ValueError(f"arm must be positive, got {arm}")
        self.arm = float(arm)

    def __repr__(self) -> str:
        return f"PVTOL(drag={self.drag}, arm={self.arm})"

    def wind_force(self, q: torch.Tensor, dq: torch.Tensor, wind: torch.Tensor) -> torch.Tensor:
        """The disturbance on (ẍ, ÿ, φ̈), ``(B, 3)``."""
        phi = q[..., 2]
        v = body_air_velocity(phi, dq, wind)
        beta = _constant(self.drag[:2], q)
        d_xy = (rotation(phi) @ (-beta * v * v.abs()).unsqueeze(-1)).squeeze(-1)
        v_r = self.arm * dq[..., 2] - v[..., 1]
        v_l = -self.arm * dq[..., 2] - v[..., 1]
        d_phi = -self.drag[2] * (v_r * v_r.abs() - v_l * v_l.abs())
        return torch.cat([d_xy, d_phi.unsqueeze(-1)], -1)

    def acceleration(
        self, q: torch.Tensor, dq: torch.Tensor, u: torch.Tensor, f_ext: torch.Tensor
    ) -> torch.Tensor:
        phi = q[..., 2]
        thrust, torque = u[..., 0], u[..., 1]
        nominal = torch.stack(
            [-thrust * torch.sin(phi), thrust * torch.cos(phi) - GRAVITY, torque], -1
        )
        return nominal + f_ext
