"""The reproduction's experiment: a tiny Spikformer on scikit-learn's digits, one optimizer per run.

Spec section 5: 8×8 digits cut into 16 tokens of 2×2 pixels, T = 4 (direct encoding), one block,
stratified split 1257/540 (``random_state=0``), batch 64, cosine decay per step, label smoothing 0.1,
weight decay on 2-D weights only. The seed sets the initialisation and the batch order, so AdamW and
AdaS runs with one seed are paired. Also the update-noise probe at a fixed θ (spec 5, proxy b and c).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from adas_optim.optimizer import AdaS
from adas_optim.snn import TinySpikformer, digits_to_tokens

LARGE = 1000  # "large tensors": λ and the noise proxies are averaged over tensors with this many elements


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """One training run. ``optimizer`` is ``"adamw"`` or ``"adas"``; ``gamma`` is AdaS's only."""

    optimizer: str
    lr: float
    seed: int
    gamma: float = 1.0
    epochs: int = 15
    dim: int = 64
    batch_size: int = 64
    n_train: int | None = None  # a prefix of the training split (smoke runs)
    weight_decay: float = 0.01
    label_smoothing: float = 0.1


def digits_data() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x_train, y_train, x_test, y_test)``: tokens ``[B, 16, 4]`` in [0, 1], split 1257/540."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = digits_to_tokens(torch.tensor(digits.images / 16.0, dtype=torch.float32))
    y = torch.tensor(digits.target)
    idx_train, idx_test = train_test_split(
        range(len(y)), test_size=540, stratify=digits.target, random_state=0
    )
    return x[idx_train], y[idx_train], x[idx_test], y[idx_test]


def param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Weight decay on matrices only (biases, norms and the position table get none)."""
    decay = [p for n, p in model.named_parameters() if p.ndim == 2 and n != "pos"]
    rest = [p for n, p in model.named_parameters() if not (p.ndim == 2 and n != "pos")]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def make_optimizer(cfg: RunConfig, model: nn.Module) -> torch.optim.Optimizer:
    groups = param_groups(model, cfg.weight_decay)
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(groups, lr=cfg.lr)
    if cfg.optimizer == "adas":
        return AdaS(groups, lr=cfg.lr, gamma=cfg.gamma)
    raise ValueError(f"optimizer must be 'adamw' or 'adas', got {cfg.optimizer!r}")


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def large_names(model: nn.Module) -> list[str]:
    return [n for n, p in model.named_parameters() if p.numel() >= LARGE]


def train(
    cfg: RunConfig,
    data: tuple[torch.Tensor, ...],
    on_step: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Train one run; return test accuracy, the update-norm trace and (AdaS) λ per large tensor.

    ``update_norm`` is ``‖Δθ‖`` over all parameters per step (weight decay included), the measure of
    the effective step size used to match AdamW's lr to AdaS's.
    """
    x, y, x_test, y_test = data
    if cfg.n_train is not None:
        x, y = x[: cfg.n_train], y[: cfg.n_train]
    torch.manual_seed(cfg.seed)
    model = TinySpikformer(dim=cfg.dim)
    opt = make_optimizer(cfg, model)
    steps_per_epoch = math.ceil(len(y) / cfg.batch_size)
    total = cfg.epochs * steps_per_epoch
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, total) / total))
    )
    names = large_names(model)
    params = dict(model.named_parameters())
    lambdas: dict[str, list[float]] = {n: [] for n in names}
    update_norms: list[float] = []
    order = torch.Generator().manual_seed(cfg.seed)
    for _epoch in range(cfg.epochs):
        model.train()
        for idx in torch.randperm(len(y), generator=order).split(cfg.batch_size):
            opt.zero_grad(set_to_none=True)
            loss = nn.functional.cross_entropy(
                model(x[idx]), y[idx], label_smoothing=cfg.label_smoothing
            )
            loss.backward()
            before = [p.detach().clone() for p in model.parameters()]
            opt.step()
            sched.step()
            delta_sq = sum(
                float((p.detach() - b).square().sum())
                for p, b in zip(model.parameters(), before, strict=True)
            )
            update_norms.append(math.sqrt(delta_sq))
            if isinstance(opt, AdaS):
                last = opt.last_lambda
                for n in names:
                    lambdas[n].append(float(last[params[n]]))
            if on_step is not None:
                on_step()
    return {
        "accuracy": accuracy(model, x_test, y_test),
        "mean_update_norm": sum(update_norms) / len(update_norms),
        "lambdas": lambdas,
        "final_loss": float(loss.detach()),
    }


def update_noise_probe(
    seed: int,
    data: tuple[torch.Tensor, ...],
    *,
    lr: float,
    gamma: float,
    warm_epochs: int,
    dim: int = 64,
    k: int = 8,
    batch_size: int = 64,
    n_train: int | None = None,
) -> dict[str, dict[str, float]]:
    """Proxies of update noise at one fixed θ and optimizer state, per optimizer.

    θ, ``m`` and ``v`` come from ``warm_epochs`` of AdamW at ``lr`` (constant); then each candidate
    takes one step from a copy of that state on each of ``k`` mini-batches. Per large tensor:

    - ``rel_variance``: ``mean_i ‖u_i − ū‖² / ‖ū‖²``, the mini-batch variance of the update relative
      to its mean (scale-free: a smaller step is not less noisy by this measure);
    - ``cosine``: mean cosine between ``−u_i`` and the full-batch training gradient at θ.

    Candidates: AdamW, AdaS(γ), AdaS(γ = ∞) (a control that must equal AdamW) and momentum SGD.
    """
    if warm_epochs < 1:
        raise ValueError(
            f"warm_epochs must be >= 1 (the probe needs AdamW's state), got {warm_epochs}"
        )
    x, y = data[0][:n_train], data[1][:n_train]
    torch.manual_seed(seed)
    model = TinySpikformer(dim=dim)
    warm = torch.optim.AdamW(param_groups(model, 0.0), lr=lr)
    order = torch.Generator().manual_seed(seed)

    def loss_on(idx: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(model(x[idx]), y[idx], label_smoothing=0.1)

    for _ in range(warm_epochs):
        for idx in torch.randperm(len(y), generator=order).split(batch_size):
            warm.zero_grad(set_to_none=True)
            loss_on(idx).backward()
            warm.step()
    names = large_names(model)
    params = dict(model.named_parameters())
    model.train()  # the batch statistics a training step sees
    full = _gradient(model, loss_on, torch.arange(len(y)).split(256))
    batches = list(torch.randperm(len(y), generator=order).split(batch_size))[:k]
    grads = [_gradient(model, loss_on, [idx]) for idx in batches]
    theta = {n: p.detach().clone() for n, p in params.items()}
    candidates = {
        "AdamW": lambda g: torch.optim.AdamW(g, lr=lr),
        "AdaS": lambda g: AdaS(g, lr=lr, gamma=gamma),
        "AdaS(gamma=inf)": lambda g: AdaS(g, lr=lr, gamma=1e30),
        "momentum SGD": lambda g: torch.optim.SGD(g, lr=lr, momentum=0.9, dampening=0.9),
    }
    out: dict[str, dict[str, float]] = {}
    for label, factory in candidates.items():
        updates = {n: [] for n in names}  # type: dict[str, list[torch.Tensor]]
        for g in grads:
            opt = factory(param_groups(model, 0.0))
            state = copy.deepcopy(warm.state_dict())
            if label != "momentum SGD":
                opt.load_state_dict(state)
            else:  # SGD's momentum buffer is AdamW's exp_avg (dampening 0.9 = (1 − β₁) weighting)
                for p in model.parameters():
                    opt.state[p]["momentum_buffer"] = warm.state[p]["exp_avg"].clone()
            for n, p in params.items():
                p.grad = g[n].clone()
            opt.step()
            for n in names:
                updates[n].append(params[n].detach() - theta[n])
            with torch.no_grad():
                for n, p in params.items():
                    p.copy_(theta[n])
        out[label] = _noise_stats(updates, full, names)
    return out


def _gradient(
    model: nn.Module, loss_on: Callable[[torch.Tensor], torch.Tensor], chunks: list[torch.Tensor]
) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    total = sum(len(c) for c in chunks)
    for idx in chunks:
        (loss_on(idx) * (len(idx) / total)).backward()
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


def _noise_stats(
    updates: dict[str, list[torch.Tensor]], full: dict[str, torch.Tensor], names: list[str]
) -> dict[str, float]:
    rel, cos = [], []
    for n in names:
        u = torch.stack(updates[n]).flatten(1)
        mean = u.mean(0)
        rel.append(float((u - mean).square().sum(1).mean() / mean.square().sum()))
        cos.append(
            float(nn.functional.cosine_similarity(-u, full[n].flatten()[None], dim=1).mean())
        )
    return {"rel_variance": sum(rel) / len(rel), "cosine": sum(cos) / len(cos)}
