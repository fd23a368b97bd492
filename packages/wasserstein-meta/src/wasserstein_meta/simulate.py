"""Fixed-step, differentiable closed-loop simulation of the adaptive controller.

The state ``(q, q̇, adaptation state, integrated costs)`` is integrated by an explicit Runge–Kutta
scheme with the reference evaluated exactly at each stage time; gradients flow through every step
(back-propagation through the solver, as in the base code). Costs are integrated alongside:
``c = (∫‖e‖² + ‖ė‖², ∫‖u‖², ∫‖Ây − f‖²)``.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import warnings
from collections.abc import Sequence

import numpy as np
import torch

from wasserstein_meta.errors import SimulationDiverged
from wasserstein_meta.pvtol import THRUST_FLOOR
from wasserstein_meta.systems import GRAVITY
from wasserstein_meta.trajectories import Spline, evaluate

# Butcher tableaux (a, b, c) of the explicit schemes.
TABLEAUX: dict[str, tuple[list[list[float]], list[float], list[float]]] = {
    "euler": ([[]], [1.0], [0.0]),
    "heun": ([[], [1.0]], [0.5, 0.5], [0.0, 1.0]),
    "rk4": (
        [[], [0.5], [0.0, 0.5], [0.0, 0.0, 1.0]],
        [1 / 6, 1 / 3, 1 / 3, 1 / 6],
        [0.0, 0.5, 0.5, 1.0],
    ),
    "rk38": (
        [[], [1 / 3], [-1 / 3, 1.0], [1.0, -1.0, 1.0]],
        [1 / 8, 3 / 8, 3 / 8, 1 / 8],
        [0.0, 1 / 3, 2 / 3, 1.0],
    ),
}
DIVERGENCE_NORM = 1e6
# The divergence check reads a tensor on the host (a sync, and a graph break under torch.compile):
# do it every CHECK_EVERY steps and at the last; a diverging state is caught within that window.
CHECK_EVERY = 10


@dataclasses.dataclass
class Trajectory:
    """A simulated batch: ``t (N+1,)``; ``q, dq, r, dr, u, s (B, N+1, 3)``; ``a_hat (B, N+1, d, m)``;
    ``state`` the adaptation state ``(B, N+1, n)``; ``force`` the true disturbance; ``cost (B, 3)``
    the integrated (tracking, control, estimation) costs."""

    t: torch.Tensor
    q: torch.Tensor
    dq: torch.Tensor
    r: torch.Tensor
    dr: torch.Tensor
    u: torch.Tensor
    s: torch.Tensor
    a_hat: torch.Tensor
    state: torch.Tensor
    force: torch.Tensor
    estimate: torch.Tensor
    cost: torch.Tensor

    @property
    def T(self) -> float:
        return float(self.t[-1] - self.t[0])


def _check_time(T: float, dt: float) -> int:
    if not (math.isfinite(dt) and dt > 0):
        raise ValueError(f"dt must be a positive finite step, got {dt}")
    if not (math.isfinite(T) and T > 0):
        raise ValueError(f"T must be a positive finite duration, got {T}")
    if dt >= T:
        raise ValueError(f"dt must be smaller than T, got dt={dt} >= T={T}")
    n = round(T / dt)
    if abs(n * dt - T) > 1e-9 * max(1.0, T):
        raise ValueError(f"T={T} is not a whole number of steps dt={dt} (nearest: {n * dt:g} s)")
    return n


def reference_stages(
    refs: Sequence[Spline],
    T: float,
    dt: float,
    integrator: str,
    dtype: torch.dtype,
    derivs: int = 2,
    device: torch.device | str | None = None,
) -> dict[float, torch.Tensor]:
    """``{c: (derivs + 1, B, N + 1, coords)}``: r, ṙ, r̈, … at the stage times ``t_i + c·dt``,
    on ``device`` (default: torch's default device)."""
    if integrator not in TABLEAUX:
        raise ValueError(f"integrator must be one of {sorted(TABLEAUX)}, got {integrator!r}")
    n_steps = _check_time(T, dt)
    for j, ref in enumerate(refs):
        if ref.T < T - 1e-9:
            raise ValueError(f"reference {j} lasts {ref.T} s, shorter than the simulation T={T}")
    grid = np.arange(n_steps + 1) * dt
    return {
        c: evaluate(refs, grid + c * dt, derivs, dtype, device)
        for c in sorted(set(TABLEAUX[integrator][2]))
    }


def _rhs(
    ctrl,
    ensemble,
    model_index: torch.Tensor,
    X: torch.Tensor,
    ref: torch.Tensor,
    consts: tuple[torch.Tensor, ...],
    records: list[dict[str, torch.Tensor]] | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``dX/dt`` at one stage (reference ``ref``, ``(derivs + 1, B, coords)``) and the count of
    batch entries at the PVTOL thrust floor there (``None`` for the PFAR)."""
    pot, plant = ctrl.potential, ctrl.plant
    nq, n = plant.dim, ctrl.n_params
    q, dq, z = X[:, :nq], X[:, nq : 2 * nq], X[:, 2 * nq : 2 * nq + n]
    out = ctrl.control(q, dq, tuple(ref), z, *consts)
    f = ensemble.force(model_index, q, dq)
    ddq = plant.acceleration(q, dq, out.u, f)
    dz = pot.state_rate(z, out.drive) if ctrl.adapts else torch.zeros_like(z)
    costs = torch.stack(
        [(out.e**2 + out.de**2).sum(-1), out.effort, ((out.estimate - f) ** 2).sum(-1)], -1
    )
    if records is not None:
        records.append(
            dict(
                q=q,
                dq=dq,
                r=out.r,
                dr=out.dr,
                u=out.u,
                s=out.s,
                a_hat=out.a_hat,
                state=z,
                force=f,
                estimate=out.estimate,
            )
        )
    saturated = out.saturated.sum() if out.saturated is not None else None
    return torch.cat([dq, ddq, dz, costs], -1), saturated


def rk_step(
    ctrl,
    ensemble,
    model_index: torch.Tensor,
    X: torch.Tensor,
    refs: tuple[torch.Tensor, ...],
    consts: tuple[torch.Tensor, ...],
    dt: float,
    integrator: str,
    records: list[dict[str, torch.Tensor]] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One explicit Runge–Kutta step of the closed loop: ``X(t + dt)`` and the number of stage
    evaluations at the PVTOL thrust floor. ``refs`` holds the reference at each stage's time.
    ``closed_loop(compile=True)`` compiles this function, one step, not the time loop: Dynamo
    would unroll the loop, and the compile time would grow with the steps."""
    a_tab, b_tab, _ = TABLEAUX[integrator]
    ks: list[torch.Tensor] = []
    saturated = X.new_zeros(())
    for a_row, ref in zip(a_tab, refs, strict=True):
        Xs = X
        for a_ij, k in zip(a_row, ks, strict=False):
            if a_ij:
                Xs = Xs + dt * a_ij * k
        k, sat = _rhs(ctrl, ensemble, model_index, Xs, ref, consts, records if not ks else None)
        if sat is not None:
            saturated = saturated + sat
        ks.append(k)
    return X + dt * sum(b * k for b, k in zip(b_tab, ks, strict=True)), saturated


@functools.cache
def compiled_rk_step():
    """:func:`rk_step` under ``torch.compile`` (static shapes), built on first use."""
    return torch.compile(rk_step, dynamic=False)


def closed_loop(
    ctrl,
    ensemble,
    refs: Sequence[Spline],
    ref_index: torch.Tensor,
    model_index: torch.Tensor,
    T: float,
    dt: float,
    integrator: str = "rk4",
    store: bool = False,
    stages: dict[float, torch.Tensor] | None = None,
    compile: bool = False,
) -> torch.Tensor | Trajectory:
    """Simulate batch entry b tracking ``refs[ref_index[b]]`` in model ``model_index[b]``.

    Runs on the device and in the dtype of ``ctrl``'s parameters; the ensemble and given
    ``stages`` must be on that device (``ValueError`` naming both otherwise). ``compile=True``
    runs each integration step through :func:`compiled_rk_step` (not with ``store``; a
    :class:`~wasserstein_meta.PVTOLController` only under ``torch.no_grad()``: ``ValueError``
    otherwise, its law back-propagates twice).
    Returns the integrated costs ``(B, 3)``, or the whole :class:`Trajectory` when ``store``.
    Raises :class:`SimulationDiverged` when a state leaves ``‖x‖ ≤ 1e6`` or turns non-finite.
    """
    if compile and store:
        raise ValueError("compile=True integrates without recording: use store=False")
    if compile and torch.is_grad_enabled():
        check_compile_grad(ctrl, "closed_loop(compile=True) with gradients enabled")
    n_steps = _check_time(T, dt)
    dtype, device = controller_dtype(ctrl), controller_device(ctrl)
    check_ensemble_device(ensemble, device)
    if stages is None:
        stages = reference_stages(refs, T, dt, integrator, dtype, ctrl.ref_derivs, device)
    for st in stages.values():
        check_device("the reference stages", st.device, device)
    c_tab = TABLEAUX[integrator][2]
    ref_index = torch.as_tensor(ref_index, device=device)
    model_index = torch.as_tensor(model_index, device=device)
    batch, n = len(ref_index), ctrl.n_params
    # Gathered once per rollout: indexing (derivs + 1, B, N + 1, ·) by ref_index at every stage
    # was a copy per call; a step's slice of the gathered grid is a view.
    stages = {c: st[:, ref_index].to(dtype) for c, st in stages.items()}
    start = stages[0.0][:, :, 0]
    x = ctrl.initial_state(start)
    z = ctrl.potential.initial_state(batch, n, x)
    X = torch.cat([x, z, x.new_zeros(batch, 3)], -1)
    records: list[dict[str, torch.Tensor]] | None = [] if store else None
    saturated = x.new_zeros(())
    step_fn = compiled_rk_step() if compile else rk_step
    nx = 2 * ctrl.plant.dim + n

    with ctrl.potential.frozen():
        consts = ctrl.rollout_constants()
        for step in range(n_steps):
            refs_at = tuple(stages[c][:, :, step] for c in c_tab)
            X, sat = step_fn(
                ctrl, ensemble, model_index, X, refs_at, consts, dt, integrator, records
            )
            saturated = saturated + sat
            if (step + 1) % CHECK_EVERY == 0 or step + 1 == n_steps:
                _check_finite(X[:, :nx], (step + 1) * dt, ref_index, model_index, ensemble)
        if records is not None:
            # The state at T (the stage grids reach step N).
            last = stages[0.0][:, :, n_steps]
            _, sat = _rhs(ctrl, ensemble, model_index, X, last, consts, records)
            saturated = saturated if sat is None else saturated + sat
    if float(saturated) > 0:
        warnings.warn(
            f"PVTOL thrust singularity: v_y + g fell to the floor {THRUST_FLOOR} at "
            f"{int(saturated)} stage evaluations and was clamped there",
            RuntimeWarning,
            stacklevel=2,
        )
    cost = X[:, -3:]
    if records is None:
        return cost
    stacked = {k: torch.stack([r[k] for r in records], 1) for k in records[0]}
    t = torch.arange(len(records), dtype=dtype, device=device) * dt
    return Trajectory(t=t, cost=cost, **stacked)


def check_compile_grad(ctrl, what: str) -> None:
    """Refuse ``what`` (a compiled step differentiated) for a controller whose law cannot be: the
    backward would fail deep inside autograd, after the forward's compile."""
    limit = getattr(ctrl, "compile_grad_limit", None)
    if limit is not None:
        raise ValueError(
            f"{what} is not supported for {type(ctrl).__name__} on {type(ctrl.plant).__name__}: "
            f"{limit}. Use compile=False to train it (a flight under "
            "torch.no_grad() may be compiled)"
        )


def controller_device(ctrl) -> torch.device:
    """The device of the controller's parameters (and buffers): the simulation runs there."""
    tensor = next(itertools.chain(ctrl.parameters(), ctrl.buffers()), None)
    return torch.device("cpu") if tensor is None else tensor.device


def check_ensemble_device(ensemble, device: torch.device) -> None:
    """An ensemble that says where it lives (``ensemble.device``) must be on ``device``; a custom
    one without the attribute is taken at its word."""
    if getattr(ensemble, "device", None) is not None:
        check_device("the ensemble", ensemble.device, device)


def check_device(what: str, device: torch.device, expected: torch.device) -> None:
    """Refuse ``what`` on ``device`` when the controller is on ``expected``: the closed loop mixes
    them at every stage, and torch's own error would come from deep inside it."""
    if torch.device(device) != torch.device(expected):
        raise ValueError(
            f"device mismatch: {what} on {device}, the controller on {expected}: move one of "
            f"them (.to({str(expected)!r}))"
        )


def controller_dtype(ctrl) -> torch.dtype:
    """The floating dtype of the controller's parameters: the simulation runs in it (float32 or
    float64: a half-precision closed loop drifts by more than the tracking errors it measures)."""
    dtype = next((p.dtype for p in ctrl.parameters() if p.is_floating_point()), None)
    dtype = torch.get_default_dtype() if dtype is None else dtype
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"the controller must be float32 or float64 to simulate, got {dtype}")
    return dtype


def _check_finite(X: torch.Tensor, time: float, ref_index, model_index, ensemble) -> None:
    bad = ~torch.isfinite(X).all(-1) | (X.detach().abs().amax(-1) > DIVERGENCE_NORM)
    if bool(bad.any()):
        idx = torch.nonzero(bad).flatten()
        raise SimulationDiverged(
            time, idx.tolist(), ref_index[idx].tolist(), ensemble.wind_of(model_index[idx])
        )


def simulate(
    ctrl,
    plant,
    ref: Spline | Sequence[Spline],
    wind: float | Sequence[float] | None = None,
    T: float = 10.0,
    dt: float = 0.01,
    integrator: str = "rk4",
    ensemble=None,
    grad: bool = False,
) -> Trajectory:
    """Fly ``ctrl`` on ``plant`` along ``ref`` in ``wind`` (or the models of ``ensemble``).

    ``ref`` and ``wind`` are paired element by element (a single one is broadcast); with an
    ``ensemble`` instead of winds, entry ``b`` flies in model ``b``. Starts at
    ``(q, q̇) = (r(0), ṙ(0))`` with the adaptation state at zero. Runs on the device and in the dtype
    of ``ctrl``'s parameters (``ctrl.double()`` for float64, ``ctrl.to("cuda")`` for a GPU). Returns a :class:`Trajectory`, without an autograd
    graph unless ``grad=True`` (then its tensors are differentiable in the meta-parameters).
    """
    from wasserstein_meta.ensemble import OracleEnsemble

    refs = [ref] if isinstance(ref, Spline) else list(ref)
    if ensemble is None:
        if wind is None:
            raise ValueError("give a wind speed (or winds), or an ensemble")
        winds = np.atleast_1d(np.asarray(wind, dtype=float))
        ensemble = OracleEnsemble(plant, winds, device=controller_device(ctrl))
    n_models = ensemble.n_models
    batch = max(len(refs), n_models)
    if len(refs) not in (1, batch) or n_models not in (1, batch):
        raise ValueError(f"cannot pair {len(refs)} references with {n_models} winds/models")
    device = controller_device(ctrl)
    ref_index = torch.arange(batch, device=device) % len(refs)
    model_index = torch.arange(batch, device=device) % n_models
    check_reference_attitude(refs, T, dt)
    with torch.set_grad_enabled(grad):
        out = closed_loop(
            ctrl, ensemble, refs, ref_index, model_index, T, dt, integrator, store=True
        )
    assert isinstance(out, Trajectory)
    return out


def check_reference_attitude(refs: Sequence[Spline], T: float, dt: float) -> None:
    """A reference with |φ| ≥ π/2 asks the vehicle to fly on its side: refuse it. For a flat-output
    (PVTOL) reference that is ``ÿ + g ≤ 0``: it would have to accelerate downwards faster than g."""
    grid = np.arange(_check_time(T, dt) + 1) * dt
    for j, ref in enumerate(refs):
        if len(ref.coeffs) == 2:
            lift = (ref(grid, 2)[2, :, 1] + GRAVITY).min()
            if lift <= THRUST_FLOOR:
                raise ValueError(
                    f"flat reference {j} needs ÿ + g = {lift:.3f} <= {THRUST_FLOOR}: the PVTOL "
                    "cannot accelerate downwards faster than gravity"
                )
            continue
        phi = np.abs(ref(grid, 0)[0, :, 2]).max()
        if phi >= math.pi / 2:
            raise ValueError(f"reference {j} reaches |φ| = {phi:.3f} >= π/2")
