"""The base code's baselines under the same API: PID, regression-oriented meta-ridge regression
(MRR, ``pfar/train_mrr.py``) and test-time gain selection from a grid ("ours" without meta gains)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import torch

from wasserstein_meta.controller import AdaptiveController
from wasserstein_meta.features import ZeroFeatures
from wasserstein_meta.simulate import closed_loop, controller_device
from wasserstein_meta.spd import as_spd_params
from wasserstein_meta.training import _pairs, refresh_atoms
from wasserstein_meta.trajectories import Spline


def pid_controller(plant, gains=None) -> AdaptiveController:
    """The PID baseline: features ≡ 0, so only the tracking law with its gains remains."""
    return AdaptiveController(plant, ZeroFeatures(), None, gains)


def meta_ridge_regression(
    features: torch.nn.Module,
    ensemble,
    states: torch.Tensor,
    steps: int = 500,
    lr: float = 1e-2,
    ridge: float = 1e-6,
    fit_frac: float = 0.25,
    reg_l2: float = 1e-4,
    seed: int = 0,
) -> list[float]:
    """Train ``features`` in place by meta-ridge regression: regression-oriented meta-learning.

    Per task the last layer is the ridge solution on a random ``fit_frac`` of the states; the loss
    is its prediction error on the rest (plus ``reg_l2 ‖θ‖²``). Returns the loss per step.
    """
    gen = torch.Generator().manual_seed(seed)
    K, S = ensemble.n_models, len(states)
    idx = torch.arange(K, device=states.device).repeat_interleave(S)
    with torch.no_grad():
        f = ensemble.force(idx, states[:, :3].repeat(K, 1), states[:, 3:].repeat(K, 1)).view(
            K, S, -1
        )
    opt = torch.optim.Adam(features.parameters(), lr=lr)
    n_fit = max(1, int(fit_frac * S))
    losses = []
    for _ in range(steps):
        perm = torch.randperm(S, generator=gen, device="cpu")  # host indices index any device
        fit, rest = perm[:n_fit], perm[n_fit:]
        y = features(states)
        yf = y[fit]
        gram = yf.T @ yf + ridge * torch.eye(y.shape[-1], dtype=y.dtype, device=y.device)
        A = torch.linalg.solve(gram, yf.T @ f[:, fit]).transpose(-1, -2)  # (K, d, m)
        pred = (A @ y[rest].T).transpose(-1, -2)
        loss = ((pred - f[:, rest]) ** 2).sum(-1).mean()
        loss = loss + reg_l2 * sum((p**2).sum() for p in features.parameters())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def select_gains(
    ctrl: AdaptiveController,
    ensemble,
    refs: Sequence[Spline],
    T: float,
    dt: float,
    integrator: str = "rk4",
    Lambda: Sequence[float] = (1.0,),
    K: Sequence[float] = (1.0, 10.0),
    P: Sequence[float] = (1.0, 10.0),
    states: torch.Tensor | None = None,
) -> dict[str, float]:
    """Set ``ctrl``'s gains to the grid point with the lowest closed-loop tracking cost.

    The base code's "ours" (control-oriented features, grid gains) picks Λ = 1, K ∈ {1, 10},
    P ∈ {1, 10} (× I; P is the adaptation gain, Γ here). Returns the chosen point.
    """
    ref_index, model_index = _pairs(len(refs), ensemble.n_models, controller_device(ctrl))
    best: tuple[float, dict[str, float]] = (np.inf, {})
    if states is not None:
        refresh_atoms(ctrl, ensemble, states)
    for lam, k, p in itertools.product(Lambda, K, P):
        _set_gains(ctrl, lam, k, p)
        with torch.no_grad():
            if states is not None:
                refresh_atoms(ctrl, ensemble, states)
            cost = closed_loop(ctrl, ensemble, refs, ref_index, model_index, T, dt, integrator)
        assert isinstance(cost, torch.Tensor)
        total = float(cost[:, 0].mean())
        if total < best[0]:
            best = (total, {"Lambda": lam, "K": k, "P": p})
    _set_gains(ctrl, **best[1])
    if states is not None:
        with torch.no_grad():
            refresh_atoms(ctrl, ensemble, states)
    return best[1]


def _set_gains(ctrl: AdaptiveController, Lambda: float, K: float, P: float) -> None:
    with torch.no_grad():
        for module, value, name in (
            (ctrl.gains.Lambda_, Lambda, "Λ"),
            (ctrl.gains.K_, K, "K"),
            (ctrl.gains.Gamma_, P, "Γ"),
        ):
            module.params.copy_(as_spd_params(value, ctrl.dim, name, module.params.device))
