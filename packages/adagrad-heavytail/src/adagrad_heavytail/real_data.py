"""The reproduction's real-data illustration: what tail index real minibatch-gradient noise has, and
AdaGrad against SGD and clipped SGD on a small network with injected heavy-tailed gradient noise.

Needs the ``reproduce`` extra (scikit-learn for the digits, shared-core's tiny Llama).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from adagrad_heavytail.noise import SymmetricStable
from adagrad_heavytail.optim import AdaGrad, ClippedSGD
from adagrad_heavytail.tail import estimate_tail_index, minibatch_gradient_noise

LRS = (0.01, 0.03, 0.1, 0.3)  # the same grid for every method


def _tail_row(noise: np.ndarray) -> dict[str, float]:
    norms = np.linalg.norm(noise, axis=1)
    return {
        "batches": noise.shape[0],
        "parameters": noise.shape[1],
        "tail_index_coordinates": estimate_tail_index(noise),
        "tail_index_norms": estimate_tail_index(norms) if norms.size >= 20 else float("nan"),
    }


def _mlp(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 10))


def _train(
    method: str, lr: float, X: torch.Tensor, y: torch.Tensor, steps: int, seed: int
) -> float:
    model = _mlp(seed)
    opt: torch.optim.Optimizer
    if method == "adagrad":
        opt = AdaGrad(model.parameters(), lr=lr, eps=0.0)
    elif method == "clipped_sgd":
        opt = ClippedSGD(model.parameters(), lr=lr, clip=1.0)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=lr)
    law = SymmetricStable(1.5, scale=0.1)
    gen = torch.Generator().manual_seed(seed + 1)
    for _ in range(steps):
        idx = torch.randint(0, X.shape[0], (64,), generator=gen)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(X[idx]), y[idx]).backward()
        for p in model.parameters():  # heavy-tailed noise on top of the minibatch noise
            assert p.grad is not None
            p.grad += law.sample(p.shape, gen, dtype=p.dtype)
        opt.step()
    with torch.no_grad():
        loss = float(torch.nn.functional.cross_entropy(model(X), y))
    return loss if np.isfinite(loss) else float("inf")


def digits_experiment(seed: int, steps: int) -> dict[str, Any]:
    """Hill tail index of the MLP's minibatch-gradient noise on digits, and a training comparison.

    Each method gets the same learning-rate grid :data:`LRS` and reports its best final loss.
    """
    from sklearn.datasets import load_digits

    X_np, y_np = load_digits(return_X_y=True)
    X = torch.tensor(X_np / 16.0, dtype=torch.float32)
    y = torch.tensor(y_np)
    model = _mlp(seed)
    gen = torch.Generator().manual_seed(seed)
    batches = [torch.randint(0, X.shape[0], (32,), generator=gen) for _ in range(200)]
    noise = minibatch_gradient_noise(
        model, lambda m, idx: torch.nn.functional.cross_entropy(m(X[idx]), y[idx]), batches
    )
    training = []
    for method in ("adagrad", "sgd", "clipped_sgd"):
        losses = {lr: _train(method, lr, X, y, steps, seed) for lr in LRS}
        best = min(losses, key=losses.__getitem__)
        training.append(
            {"method": method, "best_lr": best, "final_loss": losses[best], "steps": steps}
        )
    return {"tail": _tail_row(noise), "training": training}


def transformer_noise(seed: int, warmup_steps: int = 50, batches: int = 64) -> dict[str, Any]:
    """Hill tail index of a tiny Llama's minibatch-gradient noise on byte-level stdlib source,
    after ``warmup_steps`` of AdamW (shared-core's tiny model and corpus; nothing downloaded)."""
    from shared_core.data import lm_batches, stdlib_corpus
    from shared_core.models import causal_lm_loss, tiny_llama

    tokens = torch.tensor(list(stdlib_corpus(200_000, seed=seed).encode()), dtype=torch.long)
    model = tiny_llama(vocab_size=256, hidden_size=32, num_layers=2, num_heads=4, seed=seed)
    stream = lm_batches(tokens, seq_len=64, batch_size=8, seed=seed)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(warmup_steps):
        opt.zero_grad()
        causal_lm_loss(model, next(stream)).backward()
        opt.step()
    sample = [next(stream) for _ in range(batches)]
    noise = minibatch_gradient_noise(model, causal_lm_loss, sample)
    return {"model": "tiny Llama (2 layers, hidden 32)", **_tail_row(noise)}
