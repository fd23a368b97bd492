"""The "true dynamics" a meta-training closed loop flies in: one disturbance model per task.

An ensemble has ``n_models`` and ``force(index, q, dq) -> (B, 3)``, the disturbance of model
``index[b]`` at state ``(q[b], dq[b])``, and optionally ``device`` (where its tensors live; the
closed loop refuses an ensemble on another device than the controller's). :class:`OracleEnsemble` is the analytic wind model at given
wind speeds; :func:`fit_ensemble` is stage 1 of the base code (one network per training trajectory,
fitted by one-step prediction through the prior dynamics).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from wasserstein_meta.data import Dataset


class OracleEnsemble:
    """The plant's wind model at fixed wind speeds: task k is ``f_ext(q, q̇; winds[k])``.

    The speeds live on ``device`` (default: a tensor's own device, else torch's default), which
    must be the controller's."""

    def __init__(
        self,
        plant,
        winds: Sequence[float] | np.ndarray | torch.Tensor,
        device: torch.device | str | None = None,
    ):
        if isinstance(winds, torch.Tensor):
            device = winds.device if device is None else device
            winds = winds.detach().cpu()
        # checked on the host, then moved to ``device``
        w = torch.as_tensor(np.asarray(winds, dtype=float), device="cpu").reshape(-1)
        if len(w) == 0 or not torch.isfinite(w).all():
            raise ValueError(f"winds must be a non-empty list of finite speeds, got {w.tolist()}")
        self.plant = plant
        self.winds = torch.as_tensor(w, device=device)

    @property
    def n_models(self) -> int:
        return len(self.winds)

    @property
    def device(self) -> torch.device:
        return self.winds.device

    def wind_of(self, index: torch.Tensor) -> list[float]:
        return self.winds[index].tolist()

    def force(self, index: torch.Tensor, q: torch.Tensor, dq: torch.Tensor) -> torch.Tensor:
        return self.plant.wind_force(q, dq, self.winds.to(q.dtype)[index])

    def subset(self, index: Sequence[int]) -> OracleEnsemble:
        keep = torch.as_tensor(list(index), dtype=torch.long, device="cpu")
        return OracleEnsemble(self.plant, self.winds.cpu()[keep], device=self.device)


class LearnedEnsemble(nn.Module):
    """``f_j(x) = σ_f · A_j tanh(W₂ⱼ tanh(W₁ⱼ x̃ + b₁ⱼ) + b₂ⱼ)`` with ``x̃ = (x − μ_x) / σ_x``, all
    models in batched tensors. ``μ_x, σ_x, σ_f`` are buffers (identity until :func:`fit_ensemble`
    sets them from its data): with raw states in tanh units and a unit-scale output, a network
    initialised at 0.1 must grow its weights ~30x to reach a wind force of a few m/s², which Adam
    at lr 1e-2 did not do in hundreds of steps."""

    in_shift: torch.Tensor
    in_scale: torch.Tensor
    out_scale: torch.Tensor

    def __init__(
        self,
        plant,
        n_models: int,
        hidden: Sequence[int] = (32, 32),
        seed: int = 0,
        winds: Sequence[float] | None = None,
    ):
        super().__init__()
        # Built on the host (the generator is a CPU one: one seed, the same networks anywhere);
        # ``.to(device)`` moves it.
        gen = torch.Generator().manual_seed(seed)
        cpu = torch.device("cpu")
        dims = [2 * plant.dim, *hidden, plant.dim]
        self.plant = plant
        self.weights = nn.ParameterList(
            nn.Parameter(0.1 * torch.randn(n_models, b, a, generator=gen, device=cpu))
            for a, b in itertools.pairwise(dims)
        )
        self.biases = nn.ParameterList(
            nn.Parameter(0.1 * torch.randn(n_models, b, generator=gen, device=cpu))
            for b in dims[1:-1]
        )
        self.winds = torch.as_tensor(
            np.asarray(winds if winds is not None else [np.nan] * n_models), device=cpu
        )
        self.register_buffer("in_shift", torch.zeros(2 * plant.dim, device=cpu))
        self.register_buffer("in_scale", torch.ones(2 * plant.dim, device=cpu))
        self.register_buffer("out_scale", torch.ones((), device=cpu))

    @property
    def n_models(self) -> int:
        return self.weights[0].shape[0]

    @property
    def device(self) -> torch.device:
        return self.weights[0].device

    def wind_of(self, index: torch.Tensor) -> list[float]:
        return self.winds[index.cpu()].tolist()  # labels for error messages: kept on the host

    def force(self, index: torch.Tensor, q: torch.Tensor, dq: torch.Tensor) -> torch.Tensor:
        h = (torch.cat([q, dq], -1) - self.in_shift.to(q.dtype)) / self.in_scale.to(q.dtype)
        last = len(self.weights) - 1
        for i, W in enumerate(self.weights):
            h = (W[index].to(h.dtype) @ h.unsqueeze(-1)).squeeze(-1)
            if i < last:
                h = torch.tanh(h + self.biases[i][index].to(h.dtype))
        return h * self.out_scale.to(h.dtype)

    def subset(self, index: Sequence[int]) -> _SubEnsemble:
        return _SubEnsemble(self, torch.as_tensor(list(index), device=self.device))


class _SubEnsemble:
    """Some models of a :class:`LearnedEnsemble`, renumbered from 0 (for train/validation splits)."""

    def __init__(self, parent: LearnedEnsemble, index: torch.Tensor):
        self.parent, self.index = parent, index

    @property
    def n_models(self) -> int:
        return len(self.index)

    @property
    def device(self) -> torch.device:
        return self.parent.device

    def wind_of(self, index: torch.Tensor) -> list[float]:
        return self.parent.wind_of(self.index[index])

    def force(self, index: torch.Tensor, q: torch.Tensor, dq: torch.Tensor) -> torch.Tensor:
        return self.parent.force(self.index[index], q, dq)


def _rk38_step(plant, ens: LearnedEnsemble, q, dq, u, dt, index):
    """One RK 3/8 step of the prior dynamics with the model's disturbance, input held constant."""

    def f(x):
        qq, dd = x[..., :3], x[..., 3:]
        return torch.cat([dd, plant.acceleration(qq, dd, u, ens.force(index, qq, dd))], -1)

    x = torch.cat([q, dq], -1)
    k1 = f(x)
    k2 = f(x + dt * k1 / 3)
    k3 = f(x + dt * (-k1 / 3 + k2))
    k4 = f(x + dt * (k1 - k2 + k3))
    return x + dt * (k1 + 3 * k2 + 3 * k3 + k4) / 8


def _set_scales(ens: LearnedEnsemble, plant, q, dq, u, dt: float) -> None:
    """The data's state mean and spread (x̃ ~ unit scale), and the RMS of the force the transitions
    imply, ``(q̇_{t+1} − q̇_t)/dt − q̈_nominal(q_t, q̇_t, u_t)``: a first-order estimate, used only
    as the output's unit."""
    x = torch.cat([q, dq], -1).reshape(-1, q.shape[-1] + dq.shape[-1])
    spread = x.std(0)
    zero = torch.zeros_like(q[:, :-1])
    nominal = plant.acceleration(q[:, :-1], dq[:, :-1], u[:, :-1], zero)
    implied = (dq[:, 1:] - dq[:, :-1]) / dt - nominal
    rms = implied.pow(2).mean().sqrt()
    with torch.no_grad():
        ens.in_shift.copy_(x.mean(0))
        ens.in_scale.copy_(torch.where(spread > 1e-8, spread, torch.ones_like(spread)))
        ens.out_scale.fill_(float(rms) if float(rms) > 1e-8 else 1.0)


def fit_ensemble(
    plant,
    data: Dataset,
    hidden: Sequence[int] = (32, 32),
    epochs: int = 1000,
    lr: float = 1e-2,
    reg: float = 1e-4,
    train_frac: float = 0.75,
    batch_frac: float = 0.25,
    seed: int = 0,
    device: torch.device | str | None = None,
) -> LearnedEnsemble:
    """Stage 1: one network per trajectory of ``data``, by one-step prediction (RK 3/8).

    Loss per model: mean ``‖x̂_{t+1} − x_{t+1}‖²`` + ``reg · ‖θ‖²``; the transitions are shuffled,
    ``train_frac`` train (in batches of ``batch_frac`` of them), the rest held out; Adam; the epoch
    with the best held-out loss is kept, per model. The networks' input standardisation and output
    scale are set from ``data`` first (buffers: a ``state_dict`` round trip keeps them). Fits on
    ``device`` (default: torch's default device); the same seed draws the same networks anywhere.
    """
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    # Drawn on the host (one seed, the same networks anywhere), then moved: to torch's default
    # device when none is given, as OracleEnsemble does.
    device = torch.get_default_device() if device is None else device
    ens = LearnedEnsemble(plant, data.n_traj, hidden, seed, winds=data.wind.tolist()).to(device)
    dtype, device = ens.weights[0].dtype, ens.device
    q, dq, u = (torch.as_tensor(a, dtype=dtype, device=device) for a in (data.q, data.dq, data.u))
    dt = float(data.t[1] - data.t[0])
    J, N = q.shape[0], q.shape[1] - 1
    gen = torch.Generator().manual_seed(seed)
    perm = torch.randperm(N, generator=gen, device="cpu")  # host indices index any device
    n_train = int(train_frac * N)
    train, held = perm[:n_train], perm[n_train:]
    batch = max(1, int(batch_frac * n_train))
    models = torch.arange(J, device=device)
    _set_scales(ens, plant, q, dq, u, dt)
    opt = torch.optim.Adam(ens.parameters(), lr=lr)

    def losses(steps: torch.Tensor) -> torch.Tensor:
        idx = models.repeat_interleave(len(steps))
        qs, dqs, us = (a[:, steps].reshape(-1, a.shape[-1]) for a in (q, dq, u))
        target = torch.cat([q[:, steps + 1], dq[:, steps + 1]], -1).reshape(-1, 6)
        pred = _rk38_step(plant, ens, qs, dqs, us, dt, idx)
        return ((pred - target) ** 2).sum(-1).view(J, -1).mean(-1)

    def penalty() -> torch.Tensor:
        total = torch.zeros(J, dtype=dtype, device=device)
        for p in ens.parameters():
            total = total + (p.reshape(J, -1) ** 2).sum(-1)
        return total

    best = [p.detach().clone() for p in ens.parameters()]
    best_loss = torch.full((J,), float("inf"), dtype=dtype, device=device)
    for _ in range(epochs):
        order = train[torch.randperm(n_train, generator=gen, device="cpu")]
        for start in range(0, n_train, batch):
            opt.zero_grad()
            (losses(order[start : start + batch]) + reg * penalty()).sum().backward()
            opt.step()
        with torch.no_grad():
            val = losses(held) if len(held) else losses(train)
            better = val < best_loss
            best_loss = torch.where(better, val, best_loss)
            for b, p in zip(best, ens.parameters(), strict=True):
                b[better] = p[better]
    with torch.no_grad():
        for b, p in zip(best, ens.parameters(), strict=True):
            p.copy_(b)
    ens.requires_grad_(False)
    return ens
