"""Local plasticity rules at the steady state, and the projection that keeps the network valid.

A rule maps ``(net, pre, r)`` to parameter *deltas*: ``pre`` is the ``(B, C)`` input on the
feed-forward channels and ``r`` the ``(B, N)`` steady-state rates. Each delta of synapse ``(i, j)``
is a batch average of a function of ``r_i``, ``r_j`` (or ``pre_j``) and ``w_ij`` alone, so the rule
deltas are local by construction (tested by perturbing unconnected units). The projection applied
after each step is not: rescaling a row to its target sum uses every weight onto unit ``i`` (local to
the postsynaptic neuron, like synaptic scaling, but not to the synapse). The forms follow SAILnet
(Zylberberg et al. 2011) and E-I Net (King et al. 2013); the paper's exact rules are not public.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Protocol

import torch

from ssn_lateral.network import SSN

__all__ = [
    "AntiHebbianIE",
    "AntiHebbianII",
    "CovarianceEE",
    "FixedLikeToLike",
    "HomeostaticThreshold",
    "OjaEI",
    "OjaFeedforward",
    "PlasticityRule",
    "RowSums",
    "apply_deltas",
    "default_rules",
    "oja_delta",
    "project_",
    "switching_rules",
]


class PlasticityRule(Protocol):
    """``rule(net, pre, r) -> {block name: delta}``; deltas are added as ``block += lr * delta``."""

    def __call__(self, net: SSN, pre: torch.Tensor, r: torch.Tensor) -> dict[str, torch.Tensor]: ...


def oja_delta(post: torch.Tensor, pre: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Oja's rule averaged over the batch: ``<post pre^T> - <post^2> * w`` (row-wise decay)."""
    batch = post.shape[0]
    return post.T @ pre / batch - (post * post).mean(dim=0).unsqueeze(1) * w


def _split(net: SSN, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return r[:, : net.n_e], r[:, net.n_e :]


@dataclasses.dataclass(frozen=True)
class OjaFeedforward:
    """Oja's rule on the feed-forward weights of E (and, if ``inhibitory``, of I) units."""

    eta: float = 1e-2
    inhibitory: bool = True

    def __call__(self, net: SSN, pre: torch.Tensor, r: torch.Tensor) -> dict[str, torch.Tensor]:
        r_e, r_i = _split(net, r)
        out = {"Q_e": self.eta * oja_delta(r_e, pre, net.Q_e)}
        if self.inhibitory and net.n_i:
            out["Q_i"] = self.eta * oja_delta(r_i, pre, net.Q_i)
        return out


@dataclasses.dataclass(frozen=True)
class OjaEI:
    """Oja's rule on E->I: ``dW_ie = eta (<r_I r_E^T> - <r_I^2> W_ie)``."""

    eta: float = 1e-2

    def __call__(self, net: SSN, pre: torch.Tensor, r: torch.Tensor) -> dict[str, torch.Tensor]:
        r_e, r_i = _split(net, r)
        return {"W_ie": self.eta * oja_delta(r_i, r_e, net.W_ie)}


@dataclasses.dataclass(frozen=True)
class AntiHebbianIE:
    """Decorrelating I->E: inhibition grows where E and I are co-active above ``p_e p_i``."""

    eta: float = 1e-2
    p_e: float = 1.0
    p_i: float = 1.0

    def __call__(self, net: SSN, pre: torch.Tensor, r: torch.Tensor) -> dict[str, torch.Tensor]:
        r_e, r_i = _split(net, r)
        return {"W_ei": self.eta * (r_e.T @ r_i / r.shape[0] - self.p_e * self.p_i)}


@dataclasses.dataclass(frozen=True)
class AntiHebbianII:
    """Decorrelating I->I: ``dW_ii = eta (<r_I r_I^T> - p_i^2)``."""

    eta: float = 1e-2
    p_i: float = 1.0

    def __call__(self, net: SSN, pre: torch.Tensor, r: torch.Tensor) -> dict[str, torch.Tensor]:
        _, r_i = _split(net, r)
        return {"W_ii": self.eta * (r_i.T @ r_i / r.shape[0] - self.p_i**2)}


@dataclasses.dataclass(frozen=True)
class CovarianceEE:
    """Hebbian covariance on E->E: ``dW_ee = eta (<r_E r_E^T> - <r_E><r_E>^T)``."""

    eta: float = 1e-2

    def __call__(self, net: SSN, pre: torch.Tensor, r: torch.Tensor) -> dict[str, torch.Tensor]:
        r_e, _ = _split(net, r)
        mean = r_e.mean(dim=0)
        return {"W_ee": self.eta * (r_e.T @ r_e / r.shape[0] - torch.outer(mean, mean))}


@dataclasses.dataclass(frozen=True)
class FixedLikeToLike:
    """E->E set from feature similarity, ``W_ee -> [Q_e Q_e^T]_+`` (row sums fixed by the projection).

    The delta moves ``W_ee`` a fraction ``eta`` of the way; ``eta = 1`` sets it outright. Entry
    ``(i, j)`` uses only the feed-forward weights of units ``i`` and ``j``.
    """

    eta: float = 1.0

    def __call__(self, net: SSN, pre: torch.Tensor, r: torch.Tensor) -> dict[str, torch.Tensor]:
        target = torch.clamp(net.Q_e @ net.Q_e.T, min=0.0)
        return {"W_ee": self.eta * (target - net.W_ee)}


@dataclasses.dataclass(frozen=True)
class HomeostaticThreshold:
    """Biases track target rates: ``db = -eta (<r> - p)`` with ``p = p_e`` on E, ``p_i`` on I."""

    eta: float = 1e-2
    p_e: float = 1.0
    p_i: float = 1.0

    def __call__(self, net: SSN, pre: torch.Tensor, r: torch.Tensor) -> dict[str, torch.Tensor]:
        target = torch.cat([torch.full((net.n_e,), self.p_e), torch.full((net.n_i,), self.p_i)]).to(
            r
        )
        return {"b": -self.eta * (r.mean(dim=0) - target)}


@dataclasses.dataclass(frozen=True)
class RowSums:
    """Targets for the total weight each unit receives from each population, and for ``|Q|`` rows.

    The defaults are the two-population network of the spec (section 2.2): a network whose rows sum
    to these has, under uniform drive, the same uniform fixed point as that two-unit SSN.
    """

    ee: float = 1.25
    ei: float = 0.65
    ie: float = 1.2
    ii: float = 0.5
    q_norm: float = 1.0

    def __post_init__(self) -> None:
        for name in ("ee", "ei", "ie", "ii", "q_norm"):
            value = getattr(self, name)
            if not value >= 0:
                raise ValueError(f"RowSums.{name} must be >= 0, got {value!r}")

    def as_dict(self) -> dict[str, float]:
        return {"W_ee": self.ee, "W_ei": self.ei, "W_ie": self.ie, "W_ii": self.ii}


def _rescale_rows(block: torch.Tensor, target: float, *, no_self: bool) -> None:
    if no_self:
        block.fill_diagonal_(0.0)
    sums = block.sum(dim=1)
    # a row that lost all its weight restarts uniform rather than dividing by zero
    empty = sums <= 0
    if empty.any():
        block[empty] = 1.0
        if no_self:
            block.fill_diagonal_(0.0)
        sums = block.sum(dim=1)
    block.mul_((target / torch.clamp(sums, min=torch.finfo(block.dtype).tiny)).unsqueeze(1))


@torch.no_grad()
def project_(net: SSN, targets: RowSums | None = None) -> SSN:
    """In place: blocks >= 0, ``diag(W_ee) = 0``, row sums = targets, ``Q`` rows of norm ``q_norm``."""
    targets = targets or RowSums()
    for name, target in targets.as_dict().items():
        block = getattr(net, name).data
        if not block.numel():
            continue
        block.clamp_(min=0.0)
        if name == "W_ee" and net.n_e == 1:
            block.zero_()  # one E unit: no synapse other than the forbidden autapse
            continue
        _rescale_rows(block, target, no_self=name == "W_ee")
    for name in ("Q_e", "Q_i"):
        q = getattr(net, name).data
        if not q.numel():
            continue
        if not net.signed_input:
            q.clamp_(min=0.0)
        norms = q.norm(dim=1, keepdim=True)
        dead = (norms <= 0).squeeze(1)
        if dead.any():
            q[dead] = 1.0
            norms = q.norm(dim=1, keepdim=True)
        q.mul_(targets.q_norm / norms)
    return net


def apply_deltas(net: SSN, deltas: Mapping[str, torch.Tensor], lr_scale: float = 1.0) -> None:
    """``block += lr_scale * delta`` for every named block."""
    for name, delta in deltas.items():
        getattr(net, name).data.add_(delta, alpha=lr_scale)


def default_rules(p_e: float = 1.0, p_i: float = 2.0, eta: float = 1e-2) -> list[PlasticityRule]:
    """The spec's rule set: Oja feed-forward and E->I, anti-Hebbian I->E and I->I, covariance E->E,
    homeostatic thresholds (section 2.3)."""
    return [
        OjaFeedforward(eta),
        OjaEI(eta),
        AntiHebbianIE(eta, p_e, p_i),
        AntiHebbianII(eta, p_i),
        CovarianceEE(eta),
        HomeostaticThreshold(eta, p_e, p_i),
    ]


def switching_rules(p_e: float = 1.0, p_i: float = 2.0, eta: float = 1e-2) -> list[PlasticityRule]:
    """The rules of the setting the reproduction selects: E->I, I->E, I->I and feed-forward
    plasticity, no E->E rule and no homeostasis (README, "settings searched")."""
    return [OjaFeedforward(eta), OjaEI(eta), AntiHebbianIE(eta, p_e, p_i), AntiHebbianII(eta, p_i)]
