"""Control-oriented meta-training: back-propagate the closed-loop tracking cost into the features,
the gains and the adaptation geometry (base code, ``pfar/train_ours.py``)."""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from wasserstein_meta.errors import SimulationDiverged
from wasserstein_meta.simulate import (
    check_compile_grad,
    check_device,
    check_ensemble_device,
    check_reference_attitude,
    closed_loop,
    controller_device,
    controller_dtype,
    reference_stages,
)
from wasserstein_meta.trajectories import Spline, evaluate


@dataclasses.dataclass
class History:
    """Per-step training loss, validation loss (NaN where not evaluated), and the step kept."""

    train_loss: list[float] = dataclasses.field(default_factory=list)
    val_loss: list[float] = dataclasses.field(default_factory=list)
    best_step: int = -1
    best_val: float = math.inf


def reference_states(
    refs: Sequence[Spline],
    T: float,
    n_points: int = 50,
    ctrl=None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """``(len(refs)·n_points, 6)`` states the references ask for, sampled along them: ``(r, ṙ)``
    in float64 on ``device`` (default: torch's default device), or through
    ``ctrl.reference_state`` (the PVTOL's flatness map) on the controller's device when a
    controller is given."""
    t = np.linspace(0.0, T, n_points)
    if ctrl is None:
        r = evaluate(refs, t, 1, device=device)
        return torch.cat([r[0], r[1]], -1).reshape(-1, 6)
    r = evaluate(refs, t, ctrl.ref_derivs, device=controller_device(ctrl))
    return ctrl.reference_state(r.reshape(r.shape[0], -1, r.shape[-1]))


def task_atoms(ctrl, ensemble, states: torch.Tensor, ridge: float = 1e-3) -> torch.Tensor:
    """The ridge-regression parameters of each task under the current features, ``(K, n)``.

    ``A_k = argmin_A Σ_x ‖A y(x) − f_k(x)‖² + ρ ‖A‖²`` over ``states``, in the coordinates the
    potential acts on (``L_Γ⁻¹ A_k``), with ``ρ = ridge · tr(YᵀY)/m`` relative to the mean feature
    energy. Tanh features of a few states are nearly collinear (Gram condition ~1e6): a tiny ridge
    gives atoms of norm ~700 for forces of order 1, whose pairwise costs no ε can resolve; ρ = 1e-3
    of the mean eigenvalue keeps them at the forces' scale. Differentiable in the features.
    """
    device = controller_device(ctrl)
    check_device("the states", states.device, device)
    check_ensemble_device(ensemble, device)
    states = states.to(controller_dtype(ctrl))
    q, dq = states[:, :3], states[:, 3:]
    y = ctrl.features(states)
    K = ensemble.n_models
    idx = torch.arange(K, device=device).repeat_interleave(len(states))
    f = ensemble.force(idx, q.repeat(K, 1), dq.repeat(K, 1))
    f = ctrl.adapted_force(q.repeat(K, 1), f).view(K, len(states), -1)
    gram = y.T @ y
    gram = gram + ridge * gram.diagonal().mean() * torch.eye(
        y.shape[-1], dtype=y.dtype, device=device
    )
    A = torch.linalg.solve(gram, y.T @ f).transpose(-1, -2)  # (K, d, m)
    return ctrl.to_potential_coords(A)


def refresh_atoms(ctrl, ensemble, states: torch.Tensor) -> None:
    """Set a ``WassersteinBregman(atoms="ensemble")`` potential's atoms from ``ensemble``."""
    if getattr(ctrl.potential, "atoms_source", None) == "ensemble" and ctrl.adapts:
        ctrl.potential.set_atoms(task_atoms(ctrl, ensemble, states))


def _pairs(
    n_refs: int, n_models: int, device: torch.device | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    ref_index = torch.arange(n_refs, device=device).repeat(n_models)
    model_index = torch.arange(n_models, device=device).repeat_interleave(n_refs)
    return ref_index, model_index


def feature_l2(ctrl) -> torch.Tensor:
    total = torch.zeros((), dtype=controller_dtype(ctrl), device=controller_device(ctrl))
    for p in ctrl.features.parameters():
        total = total + (p**2).sum()
    return total


# The share of references and ensemble models meta-training holds out for validation.
VAL_FRAC = 0.25


def _split(n: int, frac: float, rng: np.random.Generator) -> tuple[list[int], list[int]]:
    perm = rng.permutation(n).tolist()
    n_val = max(1, round(frac * n)) if n > 1 else 0
    return sorted(perm[n_val:]), sorted(perm[:n_val]) or sorted(perm)


def train_val_split(
    n_refs: int, n_models: int, val_frac: float, seed: int
) -> tuple[list[int], list[int], list[int], list[int]]:
    """``meta_train``'s split: train and validation references, then train and validation
    ensemble models (a stratified ensemble needs the models meta-training keeps)."""
    rng = np.random.default_rng(seed)
    return (*_split(n_refs, val_frac, rng), *_split(n_models, val_frac, rng))


def meta_train(
    ctrl,
    ensemble,
    refs: Sequence[Spline],
    steps: int = 500,
    lr: float = 1e-2,
    T: float = 5.0,
    dt: float = 0.01,
    integrator: str = "rk4",
    reg_ctrl: float = 1e-3,
    reg_l2: float = 1e-4,
    val_frac: float = VAL_FRAC,
    val_every: int = 1,
    seed: int = 0,
    checkpoint: str | Path | None = None,
    checkpoint_every: int = 10,
    resume: bool = False,
    progress=None,
    compile: bool = False,
) -> History:
    """Meta-train ``ctrl`` in place; keep the step with the best validation loss.

    References and ensemble models are split into train and validation (``val_frac``); every step
    flies every (train model × train reference) pair for ``T`` s and takes one Adam step on
    ``[Σ (c_track + reg_ctrl · c_ctrl) + reg_l2 ‖(W, b)‖²] / (T · n_refs · n_models)``. The
    unregularised validation loss picks the step kept; a step whose validation flights diverge
    scores ``inf`` (never kept; training flights that diverge still raise), and ``RuntimeError`` is
    raised when every validation diverged. ``checkpoint`` saves the controller, the optimizer and
    the history every ``checkpoint_every`` steps; ``resume=True`` continues from it
    and gives the same result as an uninterrupted run. Trains on ``ctrl``'s device (the
    ensemble must be there too); ``compile=True`` compiles the integration step
    (:func:`~wasserstein_meta.simulate.compiled_rk_step`; not for a
    :class:`~wasserstein_meta.PVTOLController`: ``ValueError``, its law back-propagates twice).
    """
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    if len(refs) == 0:
        raise ValueError("refs must hold at least one reference trajectory, got none")
    if not 0 <= val_frac < 1:
        raise ValueError(f"val_frac must lie in [0, 1), got {val_frac}")
    if compile:
        check_compile_grad(ctrl, "meta_train(compile=True)")
    train_refs, val_refs, train_models, val_models = train_val_split(
        len(refs), ensemble.n_models, val_frac, seed
    )
    ens_train, ens_val = ensemble.subset(train_models), ensemble.subset(val_models)
    r_train, r_val = [refs[i] for i in train_refs], [refs[i] for i in val_refs]
    check_reference_attitude(list(refs), T, dt)
    dtype, device = controller_dtype(ctrl), controller_device(ctrl)
    st_train = reference_stages(r_train, T, dt, integrator, dtype, ctrl.ref_derivs, device)
    st_val = reference_stages(r_val, T, dt, integrator, dtype, ctrl.ref_derivs, device)
    train_pairs = _pairs(len(r_train), ens_train.n_models, device)
    val_pairs = _pairs(len(r_val), ens_val.n_models, device)
    states = reference_states(r_train, T, ctrl=ctrl)
    # Learnable atoms become a parameter at their first setting: before the optimizer is built.
    with torch.no_grad():
        refresh_atoms(ctrl, ens_train, states)
    opt = torch.optim.Adam([p for p in ctrl.parameters() if p.requires_grad], lr=lr)
    history = History()
    best_state = copy.deepcopy(ctrl.state_dict())
    start = 0
    path = Path(checkpoint) if checkpoint is not None else None
    if resume and path is not None and path.exists():
        saved = torch.load(path, weights_only=False, map_location=device)
        ctrl.load_state_dict(saved["ctrl"])
        opt.load_state_dict(saved["opt"])
        history, best_state, start = saved["history"], saved["best"], saved["step"]

    def loss_on(pairs, stages, rs, ens, regularise: bool) -> torch.Tensor:
        cost = closed_loop(
            ctrl, ens, rs, pairs[0], pairs[1], T, dt, integrator, stages=stages, compile=compile
        )
        assert isinstance(cost, torch.Tensor)
        total = (cost[:, 0] + reg_ctrl * cost[:, 1]).sum()
        if regularise:
            total = total + reg_l2 * feature_l2(ctrl)
        return total / (T * len(rs) * ens.n_models)

    bar = progress(total=steps, initial=start, leave=False) if progress is not None else None
    for step in range(start, steps):
        opt.zero_grad()
        refresh_atoms(ctrl, ens_train, states)
        loss = loss_on(train_pairs, st_train, r_train, ens_train, True)
        loss.backward()
        opt.step()
        history.train_loss.append(float(loss.detach()))
        val = math.nan
        if (step + 1) % val_every == 0 or step + 1 == steps:
            with torch.no_grad():
                refresh_atoms(ctrl, ens_train, states)
                try:
                    val = float(loss_on(val_pairs, st_val, r_val, ens_val, False))
                except SimulationDiverged:
                    # A step whose held-out flights diverge is the worst step, not a failed run.
                    val = math.inf
            if val < history.best_val:
                history.best_val, history.best_step = val, step
                best_state = copy.deepcopy(ctrl.state_dict())
        history.val_loss.append(val)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{float(loss.detach()):.4g}", val=f"{val:.4g}")
        if path is not None and ((step + 1) % checkpoint_every == 0 or step + 1 == steps):
            tmp = path.with_suffix(".tmp")
            torch.save(
                {
                    "ctrl": ctrl.state_dict(),
                    "opt": opt.state_dict(),
                    "history": history,
                    "best": best_state,
                    "step": step + 1,
                },
                tmp,
            )
            tmp.replace(path)
    if bar is not None:
        bar.close()
    if steps > 0 and history.best_step == -1:
        # Returning the untrained controller here would pass it off as a trained one.
        raise RuntimeError(
            f"every validation of meta_train's {steps} step(s) diverged (validation losses "
            f"{history.val_loss[-5:]} ...): no step to keep; lower lr or T, or check the ensemble"
        )
    ctrl.load_state_dict(best_state)
    with torch.no_grad():
        refresh_atoms(ctrl, ens_train, states)
    return history
