"""Fitting a neural field to one snapshot: AdamW with cosine decay, rebuilt for every snapshot.

As the official code: a random permutation per epoch, the incomplete last batch dropped, MSE loss,
the cosine schedule decaying from ``lr`` to ``end_lr`` over ``epochs * (N // batch)`` steps. With
``distributed=True`` inside an initialised ``torch.distributed`` group, training is data-parallel as
DDP does it: every rank takes its slice of every global batch and the gradients are all-reduced
(averaged) before each step, so the update is the one-process update.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

Tensor = torch.Tensor
Trainable = Literal["all", "lora"]


@dataclass(frozen=True)
class FitConfig:
    """The optimiser of one snapshot (the official NS defaults)."""

    epochs: int = 10
    lr: float = 1e-3
    weight_decay: float = 1e-4
    end_lr: float = 1e-5
    batch_size: int = 10_000

    def __post_init__(self) -> None:
        if isinstance(self.epochs, bool) or not isinstance(self.epochs, int) or self.epochs < 1:
            raise ValueError(f"epochs must be an integer >= 1, got {self.epochs!r}")
        if not self.lr > 0 or not 0 <= self.end_lr <= self.lr:
            raise ValueError(
                f"need lr > 0 and 0 <= end_lr <= lr, got lr={self.lr!r}, end_lr={self.end_lr!r}"
            )
        if not self.weight_decay >= 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay!r}")
        if (
            isinstance(self.batch_size, bool)
            or not isinstance(self.batch_size, int)
            or self.batch_size < 1
        ):
            raise ValueError(f"batch_size must be an integer >= 1, got {self.batch_size!r}")


def cosine_lr(step: int, total: int, lr: float, end_lr: float) -> float:
    """optax's ``cosine_decay_schedule(lr, total, alpha=end_lr/lr)`` at ``step``."""
    frac = min(step, total) / max(total, 1)
    return end_lr + (lr - end_lr) * 0.5 * (1 + math.cos(math.pi * frac))


def check_pair(
    coords: Tensor, target: Tensor, in_dim: int | None = None, out_dim: int | None = None
) -> None:
    """Coordinates ``(N, D)`` and targets ``(N, F)`` with the same ``N`` (errors name both shapes)."""
    if coords.ndim != 2 or target.ndim != 2 or coords.shape[0] != target.shape[0]:
        raise ValueError(
            f"coords must be (N, D) and target (N, F) with the same N, got coords {tuple(coords.shape)} "
            f"and target {tuple(target.shape)}"
        )
    if in_dim is not None and coords.shape[1] != in_dim:
        raise ValueError(f"coords have D={coords.shape[1]} but the model takes in_dim={in_dim}")
    if out_dim is not None and target.shape[1] != out_dim:
        raise ValueError(f"target has F={target.shape[1]} but the model gives out_dim={out_dim}")


def set_trainable(model: nn.Module, which: Trainable) -> list[nn.Parameter]:
    """Freeze everything but ``which`` ("all", or the LoRA factors) and return those parameters."""
    params = []
    for name, p in model.named_parameters():
        train = which == "all" or name.endswith(("lora_a", "lora_b"))
        p.requires_grad_(train)
        if train:
            params.append(p)
    if not params:
        raise ValueError(f"no parameters to train for {which!r} (a LoRA fit needs adapters)")
    return params


def _world() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def fit(
    model: nn.Module,
    coords: Tensor,
    target: Tensor,
    config: FitConfig,
    which: Trainable = "all",
    generator: torch.Generator | None = None,
    distributed: bool = False,
) -> float:
    """Train ``model`` on ``(coords, target)``; return the mean MSE of the last epoch.

    A ``batch_size`` larger than ``N`` is clamped to ``N`` with a warning (the official code then
    trains on nothing and divides by zero).
    """
    check_pair(coords, target)
    n = coords.shape[0]
    batch = config.batch_size
    if batch > n:
        warnings.warn(f"batch_size={batch} is larger than N={n}: clamped to {n}", stacklevel=2)
        batch = n
    rank, world = _world() if distributed else (0, 1)
    if batch % world:
        raise ValueError(f"batch_size={batch} must be divisible by the world size {world}")
    flat = flatten_parameters(set_trainable(model, which))
    opt = AdamW(flat, weight_decay=config.weight_decay)
    steps = n // batch
    total = config.epochs * steps
    step = 0
    last = float("nan")
    for _ in range(config.epochs):
        perm = torch.randperm(n, generator=generator)
        running = torch.zeros((), dtype=torch.float64)
        for b in range(steps):
            idx = perm[b * batch : (b + 1) * batch][rank::world]
            loss = torch.mean((model(coords[idx]) - target[idx]) ** 2)
            assert flat.grad is not None
            flat.grad.zero_()
            loss.backward()
            if world > 1:  # what DDP does, in one bucket: the mean of the ranks' gradients
                _all_reduce_mean(flat.grad, world)
            opt.step(cosine_lr(step, total, config.lr, config.end_lr))
            running += loss.detach().to(torch.float64)
            step += 1
        last = float(_mean_over_ranks(running / steps, world))
    for p in model.parameters():
        p.requires_grad_(True)
        p.grad = None
    return last


class AdamW:
    """AdamW on one flat tensor: ``torch.optim.AdamW``'s update (decoupled decay, bias correction).

    Hand-written because the first ``torch.optim`` step imports ``torch._dynamo`` (tens of seconds
    on a loaded CPU box), a cost every fresh process would pay before its first snapshot.
    """

    def __init__(
        self,
        param: nn.Parameter,
        weight_decay: float = 1e-4,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        self.param, self.weight_decay, self.betas, self.eps = param, weight_decay, betas, eps
        self.m = torch.zeros_like(param)
        self.v = torch.zeros_like(param)
        self.t = 0

    @torch.no_grad()
    def step(self, lr: float) -> None:
        assert self.param.grad is not None
        b1, b2 = self.betas
        self.t += 1
        g, p = self.param.grad, self.param
        p.mul_(1 - lr * self.weight_decay)
        self.m.lerp_(g, 1 - b1)
        self.v.mul_(b2).addcmul_(g, g, value=1 - b2)
        denom = (self.v / (1 - b2**self.t)).sqrt_().add_(self.eps)
        p.addcdiv_(self.m, denom, value=-lr / (1 - b1**self.t))


def flatten_parameters(params: list[nn.Parameter]) -> nn.Parameter:
    """Make ``params`` views of one flat Parameter (and their grads views of its grad).

    AdamW is elementwise, so one step on the flat tensor is the per-parameter step; it costs a
    handful of kernel launches instead of a dozen per layer (the tiny fields are launch-bound).
    """
    flat = nn.Parameter(torch.cat([p.detach().reshape(-1) for p in params]))
    grad = torch.zeros_like(flat)
    offset = 0
    for p in params:
        size = p.numel()
        p.data = flat.data[offset : offset + size].view_as(p)
        p.grad = grad[offset : offset + size].view_as(p)
        offset += size
    flat.grad = grad
    return flat


def _all_reduce_mean(value: Tensor, world: int) -> None:
    import torch.distributed as dist

    dist.all_reduce(value)
    value.div_(world)


def _mean_over_ranks(value: Tensor, world: int) -> Tensor:
    if world == 1:
        return value

    value = value.clone()
    _all_reduce_mean(value, world)
    return value


@torch.no_grad()
def predict(model: nn.Module, coords: Tensor, chunk: int = 65_536) -> Tensor:
    """``model(coords)`` in chunks, without autograd."""
    return torch.cat([model(coords[i : i + chunk]) for i in range(0, coords.shape[0], chunk)])


@torch.no_grad()
def mse(model: nn.Module, coords: Tensor, target: Tensor) -> float:
    return float(torch.mean((predict(model, coords) - target).to(torch.float64) ** 2))
