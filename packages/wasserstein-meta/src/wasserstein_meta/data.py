"""Training data: trajectories flown by a nominal controller that ignores the wind (base code's
``pfar/generate_data.py``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from wasserstein_meta.systems import PFAR, PVTOL
from wasserstein_meta.trajectories import evaluate, random_splines


@dataclasses.dataclass
class Dataset:
    """``t (N+1,)``; ``q, dq (J, N+1, 3)``, ``u (J, N+1, inputs)``; ``wind (J,)``, one per trajectory."""

    t: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    u: np.ndarray
    wind: np.ndarray

    @property
    def n_traj(self) -> int:
        return self.q.shape[0]

    def subset(self, index) -> Dataset:
        return Dataset(self.t, self.q[index], self.dq[index], self.u[index], self.wind[index])


def generate(
    plant,
    wind,
    n_traj: int = 50,
    T: float = 30.0,
    dt: float = 0.01,
    kp: float = 10.0,
    kd: float = 0.1,
    seed: int = 0,
) -> Dataset:
    """Fly ``n_traj`` random references (T s, 6-knot splines) in winds drawn from ``wind``.

    PFAR: the nominal controller is the feedback-linearising PD ``u = B⁻¹(r̈ − kp e − kd ė + g)``
    that ignores the wind; states are integrated by RK4 with the input held over each step.
    PVTOL: flat-output splines tracked by the flatness law at the base code's nominal gains (all 1),
    no adaptation, RK4 with the feedback evaluated at every stage (``kp``, ``kd`` unused).
    """
    if not isinstance(plant, PFAR | PVTOL):
        raise TypeError(f"plant must be a PFAR or a PVTOL, got {type(plant).__name__}")
    if n_traj < 1:
        raise ValueError(f"n_traj must be >= 1, got {n_traj}")
    if not (dt > 0 and dt < T):
        raise ValueError(f"need 0 < dt < T, got dt={dt}, T={T}")
    rng = np.random.default_rng(seed)
    winds = wind.sample(n_traj, rng)
    if isinstance(plant, PVTOL):
        return _generate_pvtol(plant, winds, T, dt, int(rng.integers(2**31)))
    refs = random_splines(n_traj, T=T, seed=int(rng.integers(2**31)))
    n_steps = round(T / dt)
    t = np.arange(n_steps + 1) * dt
    # On the host whatever torch's default device: the flights end as numpy arrays.
    ref = evaluate(refs, t, 2, device="cpu")
    w = torch.as_tensor(winds, device="cpu")
    q, dq = ref[0, :, 0].clone(), ref[1, :, 0].clone()
    qs, dqs, us = [q], [dq], []

    def accel(q, dq, u):
        return plant.acceleration(q, dq, u, plant.wind_force(q, dq, w))

    for i in range(n_steps):
        e, de = q - ref[0, :, i], dq - ref[1, :, i]
        tau = ref[2, :, i] - kp * e - kd * de + plant.gravity(q)
        u = torch.linalg.solve(plant.input_matrix(q), tau)
        k1 = (dq, accel(q, dq, u))
        k2 = (dq + 0.5 * dt * k1[1], accel(q + 0.5 * dt * k1[0], dq + 0.5 * dt * k1[1], u))
        k3 = (dq + 0.5 * dt * k2[1], accel(q + 0.5 * dt * k2[0], dq + 0.5 * dt * k2[1], u))
        k4 = (dq + dt * k3[1], accel(q + dt * k3[0], dq + dt * k3[1], u))
        q = q + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        dq = dq + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        qs.append(q)
        dqs.append(dq)
        us.append(u)
    us.append(us[-1])
    return Dataset(
        t=t,
        q=torch.stack(qs, 1).numpy(),
        dq=torch.stack(dqs, 1).numpy(),
        u=torch.stack(us, 1).numpy(),
        wind=winds,
    )


def _generate_pvtol(plant: PVTOL, winds: np.ndarray, T: float, dt: float, seed: int) -> Dataset:
    from wasserstein_meta.features import ZeroFeatures
    from wasserstein_meta.pvtol import PVTOLController
    from wasserstein_meta.simulate import simulate
    from wasserstein_meta.trajectories import random_flat_splines

    refs = random_flat_splines(len(winds), T=T, seed=seed)
    nominal = PVTOLController(plant, ZeroFeatures(), None).to("cpu", torch.float64)
    traj = simulate(nominal, plant, refs, wind=winds.tolist(), T=T, dt=dt)
    return Dataset(
        t=traj.t.numpy(), q=traj.q.numpy(), dq=traj.dq.numpy(), u=traj.u.numpy(), wind=winds
    )
