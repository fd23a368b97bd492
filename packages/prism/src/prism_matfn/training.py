"""The small CPU training comparison of the reproduction, on scikit-learn's digits (no download).

An MLP trained by AdamW, Muon (Keller's quintic) and PrismMuon; a small CNN trained by Shampoo with
exact (eigh) and PRISM inverse roots. Each run returns its loss curve, test accuracy and optimizer time.
"""

from __future__ import annotations

import importlib.util
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from prism_matfn.alpha import ALPHA_BOUNDS
from prism_matfn.optim import PrismMuon, PrismShampoo
from shared_core.cli import progress

MUON_COEFFICIENTS = (3.4445, -4.7750, 2.0315)
"""Keller's quintic: what ``torch.optim.Muon`` and KellerJordan/Muon run (here in float32)."""


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
    probe: list[torch.Tensor] | None = None,
    probe_every: int = 25,
) -> dict[str, Any]:
    """Minibatch training; returns ``losses`` (per step), ``test_accuracy`` and ``optimizer_s``.

    With ``probe`` (the hidden matrices), every ``probe_every`` steps it also measures the spectral
    norm of each matrix's step divided by the group's lr (``update_spectral_norm``, the mean): the
    effective step size at equal nominal lr.
    """
    x, y, x_test, y_test = data
    g = torch.Generator().manual_seed(seed)
    losses, opt_time, norms = [], 0.0, []
    lr = optimizer.param_groups[0]["lr"]
    for i in progress(range(steps), desc=f"training ({type(optimizer).__name__})", leave=False):
        idx = torch.randint(len(x), (batch,), generator=g)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        measure = probe is not None and i % probe_every == probe_every - 1
        before = [w.detach().clone() for w in probe] if measure and probe is not None else []
        start = time.perf_counter()
        optimizer.step()
        opt_time += time.perf_counter() - start
        for w, w0 in zip(probe or [], before, strict=False):
            norms.append(float(torch.linalg.matrix_norm(w.detach() - w0, ord=2)) / lr)
        losses.append(loss.item())
    with torch.no_grad():
        accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
    spectral = sum(norms) / len(norms) if norms else math.nan
    return {"losses": losses, "test_accuracy": accuracy, "optimizer_s": opt_time,
            "update_spectral_norm": spectral}  # fmt: skip


ADAM_LR = 1e-3
"""lr of the AdamW side (head and vectors) of every Muon-type run: one value, shared by all."""
LR_GRIDS: dict[str, tuple[float, ...]] = {
    "AdamW": (1e-3, 3e-3, 1e-2),
    "Muon": (0.01, 0.02, 0.04),
    "PrismMuon": (0.01, 0.02, 0.04),
    "PrismMuon-fixed-alpha": (0.01, 0.02, 0.04),
    "PrismMuon-frobenius": (0.02,),
}
"""One three-point grid per optimizer (the same grid for Muon and PrismMuon), searched on tuning
seeds; each grid brackets its optimizer's best lr on the digits MLP (AdamW's moved up from
(3e-4, 1e-3, 3e-3), whose top was its best; the report says whether every chosen lr is interior).
PrismMuon-fixed-alpha is PrismMuon with ``fit="fixed"`` (α = 29/20 on every iteration, no fit): the
arm that shows what the α fit adds. PrismMuon-frobenius is the 0.1 behaviour (Frobenius rescale at
lr 0.02), a control, not tuned."""


def make_optimizer(
    name: str, model: nn.Sequential, lr: float, **extra: Any
) -> torch.optim.Optimizer:
    """The optimizers of the comparison: Muon is ``PrismMuon`` with Keller's fixed coefficients, so
    momentum, AdamW side and batching are shared and only the orthogonaliser differs."""
    if name == "AdamW":
        return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    table: dict[str, dict[str, Any]] = {
        "Muon": {"ns_coefficients": MUON_COEFFICIENTS},
        "PrismMuon": {},
        "PrismMuon-fixed-alpha": {"fit": "fixed"},
        "PrismMuon-frobenius": {"update_scale": "frobenius"},
    }
    options = table[name]
    return PrismMuon(muon_groups(model), lr=lr, adam_lr=ADAM_LR, **options, **extra)


def final_loss(losses: list[float], window: int) -> float:
    """Mean of the last ``window`` training losses."""
    return sum(losses[-window:]) / len(losses[-window:])


def muon_comparison(
    steps: int, tune_seeds: tuple[int, ...], eval_seeds: tuple[int, ...],
    grids: dict[str, tuple[float, ...]] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """AdamW vs Muon vs PrismMuon (and PrismMuon with the Frobenius update scale) on the digits MLP.

    Equal budget (``steps`` minibatches of 64); each optimizer's lr is picked from its grid by the
    mean final loss over ``tune_seeds``, then it is rerun on fresh ``eval_seeds`` (initialisation and
    batch order; the data split is fixed). A last PrismMuon run logs α on the first evaluation seed.
    """
    grids = grids or LR_GRIDS
    data = digits(0)
    window = max(1, steps // 10)

    def run(name: str, lr: float, seed: int, **extra: Any) -> tuple[dict[str, Any], Any]:
        model = mlp(seed)
        opt = make_optimizer(name, model, lr, **extra)
        probe = [p for p in muon_groups(model)[0]["params"]]
        return train(model, opt, data, steps, seed=seed, probe=probe), opt

    tuning: dict[str, dict[float, list[float]]] = {}
    chosen: dict[str, float] = {}
    for name, grid in grids.items():
        tuning[name] = {lr: [final_loss(run(name, lr, s)[0]["losses"], window) for s in tune_seeds]
                        for lr in grid}  # fmt: skip
        losses = tuning[name]
        chosen[name] = min(grid, key=lambda lr: sum(losses[lr]))
    runs = {name: [run(name, chosen[name], s)[0] for s in eval_seeds] for name in grids}
    _, opt = run("PrismMuon", chosen["PrismMuon"], eval_seeds[0], log_alphas=True)
    assert isinstance(opt, PrismMuon) and opt.alpha_log is not None
    alphas = torch.cat([a.reshape(len(a), -1) for a in opt.alpha_log], dim=1)  # (k, calls)
    at_bound = (alphas >= ALPHA_BOUNDS[5][1] - 1e-9).double()
    return {"tuning": {n: {str(lr): v for lr, v in t.items()} for n, t in tuning.items()},
            "chosen": chosen, "runs": runs, "window": window,
            "alpha_at_upper_bound": at_bound.mean(1).tolist(),
            "alpha_mean": alphas.mean(1).tolist()}  # fmt: skip


SHAMPOO_ARMS: dict[str, dict[str, Any]] = {
    "Shampoo-eigh": {"matrix_fn": "eigh"},
    "Shampoo-PRISM": {"matrix_fn": "prism"},
    "Shampoo-identity": {"matrix_fn": "prism", "max_preconditioner_dim": 1},
}
"""The Shampoo arms. ``Shampoo-identity`` preconditions no side (every side is longer than
``max_preconditioner_dim=1``), so its step is Adam-grafted momentum: the negative control that a
"matches eigh" claim must tell apart from eigh."""
SHAMPOO_LR = 3e-3


def shampoo_optimizer(name: str, model: nn.Module) -> PrismShampoo:
    return PrismShampoo(
        model.parameters(), lr=SHAMPOO_LR, precondition_frequency=10, **SHAMPOO_ARMS[name]
    )


def shampoo_comparison(steps: int, seeds: tuple[int, ...]) -> dict[str, list[dict[str, Any]]]:
    """Shampoo with eigh vs PRISM (5 steps) inverse square roots, and the identity control, on the
    digits CNN; one run per arm and seed (initialisation and batch order; the data split is fixed)."""
    data = digits(0)
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in SHAMPOO_ARMS}
    for seed in seeds:
        for name in SHAMPOO_ARMS:
            model = cnn(seed)
            out[name].append(train(model, shampoo_optimizer(name, model), data, steps, seed=seed))
    return out


def shampoo_step_timing(repeats: int, seed: int = 0) -> dict[str, Any]:
    """PRISM-root vs eigh-root Shampoo optimizer time, interleaved (``shared_core.bench.compare``).

    The timed unit is one precondition cycle: 10 optimizer steps (one root recomputation and nine
    steps reusing the roots) on the digits CNN with a fixed minibatch gradient, from the same state.
    """
    from shared_core.bench import compare

    x, y, _, _ = digits(0)
    idx = torch.randint(len(x), (64,), generator=torch.Generator().manual_seed(seed))
    cycles = {}
    for name in ("Shampoo-PRISM", "Shampoo-eigh"):
        model = cnn(seed)
        nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
        opt = shampoo_optimizer(name, model)

        def cycle(opt: PrismShampoo = opt) -> None:
            with torch.no_grad():
                for _ in range(10):
                    opt.step()

        cycles[name] = cycle
    result = compare(cycles["Shampoo-PRISM"], cycles["Shampoo-eigh"], name="Shampoo-PRISM",
                     baseline_name="Shampoo-eigh", repeats=repeats, warmup=1)  # fmt: skip
    return result.as_row()
