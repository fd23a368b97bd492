"""The small CPU training comparison of the reproduction, on scikit-learn's digits (no download).

An MLP trained by AdamW, Muon (Keller's quintic) and PrismMuon; a small CNN trained by Shampoo with
exact (eigh) and PRISM inverse roots. Each run returns its loss curve, test accuracy and optimizer time.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from prism_matfn.baselines import newton_schulz
from prism_matfn.optim import PrismMuon, PrismShampoo
from prism_matfn.optim.muon import muon_scale
from shared_core.cli import progress


class MuonBaseline(PrismMuon):
    """Muon as KellerJordan/Muon runs it: the fixed quintic (3.4445, −4.7750, 2.0315), 5 steps, Keller
    scaling, no renormalisation of the output. Same momentum and AdamW rules as :class:`PrismMuon`."""

    @torch.no_grad()
    def orthogonalize(
        self, update: torch.Tensor, group: dict[str, Any], sketch: torch.Tensor
    ) -> torch.Tensor:
        O = newton_schulz(update, group["ns_steps"], "muon", check_finite=False)
        assert isinstance(O, torch.Tensor)
        return O.float() * muon_scale(update.shape, group["adjust_lr"])


def digits(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """scikit-learn's 8×8 digits, scaled to [0, 1], split 75/25: ``(x_train, y_train, x_test, y_test)``."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "the training comparison needs scikit-learn: pip install 'prism-matfn[reproduce]'"
        )
    path = Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"
    if path.exists():
        # Read the file load_digits reads, without importing scikit-learn (seconds of start-up).
        table = np.loadtxt(path, delimiter=",")
        features, target = table[:, :-1], table[:, -1].astype(np.int64)
    else:
        from sklearn.datasets import load_digits

        features, target = load_digits(return_X_y=True)
    x = torch.tensor(features, dtype=torch.float32) / 16.0
    y = torch.tensor(target)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    cut = int(0.75 * len(x))
    train, test = order[:cut], order[cut:]
    return x[train], y[train], x[test], y[test]


def mlp(seed: int) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
    )


def cnn(seed: int) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Unflatten(1, (1, 8, 8)),
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(128, 10),
    )  # fmt: skip


def muon_groups(model: nn.Sequential) -> list[dict[str, Any]]:
    """Hidden matrices to Muon; the output head and all vectors to AdamW (Muon's convention)."""
    *body, head = model.children()
    hidden = [p for m in body for p in m.parameters() if p.ndim >= 2]
    rest = [p for m in body for p in m.parameters() if p.ndim < 2] + list(head.parameters())
    return [{"params": hidden}, {"params": rest, "use_muon": False}]


def train(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    data: tuple[torch.Tensor, ...],
    steps: int,
    batch: int = 64,
    seed: int = 0,
) -> dict[str, Any]:
    """Minibatch training; returns ``losses`` (per step), ``test_accuracy`` and ``optimizer_s``."""
    x, y, x_test, y_test = data
    g = torch.Generator().manual_seed(seed)
    losses, opt_time = [], 0.0
    for _ in progress(range(steps), desc=f"training ({type(optimizer).__name__})", leave=False):
        idx = torch.randint(len(x), (batch,), generator=g)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        start = time.perf_counter()
        optimizer.step()
        opt_time += time.perf_counter() - start
        losses.append(loss.item())
    with torch.no_grad():
        accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
    return {"losses": losses, "test_accuracy": accuracy, "optimizer_s": opt_time}


def muon_comparison(steps: int, seed: int = 0) -> dict[str, dict[str, Any]]:
    """AdamW vs Muon vs PrismMuon on the digits MLP, same initialisation and batches."""
    data = digits(seed)
    runs: dict[str, Callable[[nn.Sequential], torch.optim.Optimizer]] = {
        "AdamW": lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.0),
        "Muon": lambda m: MuonBaseline(muon_groups(m), lr=0.02, adam_lr=1e-3),
        "PrismMuon": lambda m: PrismMuon(muon_groups(m), lr=0.02, adam_lr=1e-3),
    }
    out = {}
    for name, make in runs.items():
        model = mlp(seed)
        out[name] = train(model, make(model), data, steps, seed=seed)
    return out


def shampoo_comparison(steps: int, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Shampoo with eigh vs PRISM (5 steps) inverse square roots on the digits CNN."""
    data = digits(seed)
    out = {}
    for name, matrix_fn in (("Shampoo-eigh", "eigh"), ("Shampoo-PRISM", "prism")):
        model = cnn(seed)
        opt = PrismShampoo(
            model.parameters(), lr=3e-3, matrix_fn=matrix_fn, precondition_frequency=10
        )
        out[name] = train(model, opt, data, steps, seed=seed)
    return out
