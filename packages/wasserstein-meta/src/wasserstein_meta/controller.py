"""The adaptive controller: a sliding-variable tracking law with features adapted by mirror descent.

For the fully-actuated plant ``H q̈ + C q̇ + g = B u + f`` (base code, ``pfar/train_ours.py``)::

    e = q − r,  s = ė + Λe,  v = ṙ − Λe,  v̇ = r̈ − Λė
    τ = H v̇ + C v + g − Â y(q, q̇) − K s,   u = B⁻¹ τ

and the parameters adapt by ``d/dt ∇ψ(b̂) = vec(L_Γᵀ s yᵀ)`` with ``Â = L_Γ B̂``, ``Γ = L_Γ L_Γᵀ``.
If ``f = A* y`` the error dynamics are ``ṡ = −K s − (Â − A*) y`` and
``V = ½‖s‖² + D_ψ(b*, b̂)`` (``b* = L_Γ⁻¹ A*``) has ``V̇ = −sᵀKs`` for every strictly convex ψ.
With ``ψ = Quadratic(P)`` this is the published law ``Â̇ = L_Γ P L_Γᵀ s yᵀ`` (Γ = I: ``P s yᵀ``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, cast

import torch
from torch import nn

from wasserstein_meta.features import MLPFeatures, ZeroFeatures
from wasserstein_meta.potentials import BregmanPotential, Quadratic
from wasserstein_meta.spd import PDGains

if TYPE_CHECKING:
    from wasserstein_meta.pvtol import PVTOLGains


@dataclasses.dataclass
class ControlOutput:
    u: torch.Tensor  # (B, 3) inputs
    s: torch.Tensor  # (B, 3) sliding variable
    e: torch.Tensor  # (B, 3) position error
    de: torch.Tensor  # (B, 3) velocity error
    y: torch.Tensor  # (B, m) features
    a_hat: torch.Tensor  # (B, d, m) the estimate Â
    drive: torch.Tensor  # (B, d·m) vec(L_Γᵀ s yᵀ)
    r: torch.Tensor  # (B, 3) the reference configuration and its rate
    dr: torch.Tensor
    estimate: torch.Tensor  # (B, 3) the adapted model of the disturbance on q̈
    effort: torch.Tensor  # (B,) the control cost's integrand
    saturated: torch.Tensor | None = None  # (B,) bool: a clamp was active (PVTOL thrust floor)


class AdaptiveController(nn.Module):
    """``AdaptiveController(plant, features, potential, gains)``: an ``nn.Module`` of meta-parameters.

    ``features`` maps ``(q, q̇)`` to ``y ∈ R^m`` (``MLPFeatures`` or ``ZeroFeatures`` for PID),
    ``potential`` sets the adaptation geometry (default ``Quadratic()``: the Euclidean law),
    ``gains`` holds Λ, K, Γ (default all identity).
    """

    def __init__(
        self,
        plant,
        features: nn.Module | None = None,
        potential: BregmanPotential | None = None,
        gains: PDGains | PVTOLGains | None = None,
    ):
        super().__init__()
        self.plant = plant
        self.features = features if features is not None else MLPFeatures(2 * plant.dim)
        inputs = getattr(plant, "input_dim", plant.dim)
        self.potential = potential if potential is not None else Quadratic(dim=inputs)
        # A PVTOLController keeps PVTOLGains here and overrides every method that reads Λ or K.
        self.gains = cast(PDGains, gains) if gains is not None else PDGains(plant.dim)
        if self.gains.dim != inputs:
            raise ValueError(
                f"gains are {self.gains.dim}-dimensional, the plant has {inputs} inputs"
            )
        self.dim = inputs
        self.m = int(cast(int, self.features.out_dim))
        self.n_params = self.dim * self.m
        self.potential.bind(self.n_params)

    # References are splines of (x, y, φ) with r, ṙ, r̈ (PVTOL: flat outputs with four derivatives).
    ref_derivs = 2
    # Why a compiled step cannot be differentiated (None: it can); closed_loop refuses
    # compile=True with gradients enabled when set.
    compile_grad_limit: str | None = None

    def rollout_constants(self) -> tuple[torch.Tensor, ...]:
        """What :meth:`control` needs that is fixed over a rollout: ``(L_Γ, Λ, K)``."""
        return self.gamma_factor(), self.gains.Lambda, self.gains.K

    def initial_state(self, ref: torch.Tensor) -> torch.Tensor:
        """``(q, q̇)(0) = (r, ṙ)(0)`` from the reference's derivatives ``(derivs + 1, B, 3)``."""
        return torch.cat([ref[0], ref[1]], -1)

    def reference_state(self, ref: torch.Tensor) -> torch.Tensor:
        """The state ``(r, ṙ)`` the reference asks for, ``(B, 6)``."""
        return torch.cat([ref[0], ref[1]], -1)

    def adapted_force(self, q: torch.Tensor, force: torch.Tensor) -> torch.Tensor:
        """A disturbance in the coordinates ``Â y`` models (fully actuated: the force itself)."""
        return force

    @property
    def adapts(self) -> bool:
        return not isinstance(self.features, ZeroFeatures)

    def gamma_factor(self) -> torch.Tensor:
        """``L_Γ`` with ``Γ = L_Γ L_Γᵀ``."""
        return self.gains.Gamma_.factor()

    def estimate(self, state: torch.Tensor, L_gamma: torch.Tensor) -> torch.Tensor:
        """``Â = L_Γ B̂``, ``(B, d, m)``, from the adaptation state."""
        b_hat = self.potential.estimate(state).view(-1, self.dim, self.m)
        return L_gamma @ b_hat

    def to_potential_coords(self, A: torch.Tensor) -> torch.Tensor:
        """``vec(L_Γ⁻¹ A)``: a parameter matrix (..., d, m) in the coordinates ψ acts on."""
        L = self.gamma_factor()
        b = torch.linalg.solve_triangular(L, A.reshape(-1, self.dim, self.m), upper=False)
        return b.reshape(*A.shape[:-2], self.n_params)

    def control(
        self,
        q: torch.Tensor,
        dq: torch.Tensor,
        ref: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
        state: torch.Tensor,
        L_gamma: torch.Tensor,
        Lam: torch.Tensor,
        K: torch.Tensor,
    ) -> ControlOutput:
        """The control law at one instant (Λ, K, L_Γ passed in: built once per rollout)."""
        r, dr, ddr = ref
        e, de = q - r, dq - dr
        s = de + e @ Lam.T
        dv = ddr - de @ Lam.T  # v̇ for v = ṙ − Λe; C = 0 on these plants, so C v drops out
        y = self.features(torch.cat([q, dq], -1))
        a_hat = self.estimate(state, L_gamma)
        # H = I on the PFAR: τ = v̇ + g − Â y − K s.
        tau = dv + self.plant.gravity(q) - (a_hat @ y.unsqueeze(-1)).squeeze(-1) - s @ K.T
        u = self.plant.solve_input(q, tau)
        drive = ((s @ L_gamma).unsqueeze(-1) * y.unsqueeze(-2)).reshape(-1, self.n_params)
        return ControlOutput(
            u=u,
            s=s,
            e=e,
            de=de,
            y=y,
            a_hat=a_hat,
            drive=drive,
            r=r,
            dr=dr,
            estimate=(a_hat @ y.unsqueeze(-1)).squeeze(-1),
            effort=(u**2).sum(-1),
        )
