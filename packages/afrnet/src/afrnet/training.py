"""The paper's training protocol (``main.py``/``run.py``): Adam, cosine schedule, gradient clipping,
best-validation-AUC model selection, a fixed data split and several init seeds (mean ± std).

Works for :class:`~afrnet.model.AFRNet` and for every baseline of :mod:`afrnet.baselines` (all take
``model(sc, fc, features=..., node_mask=...)``).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from afrnet.data import ConnectomeDataset, check_labels
from afrnet.model import AFROutput

DATA_SEED = 20010920  # the official fixed data seed


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Defaults are the official ``main.py``'s."""

    epochs: int = 50
    batch_size: int = 64
    lr: float = 5e-4
    weight_decay: float = 1e-3
    eta_min: float = 1e-6
    clip_norm: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError(
                f"epochs and batch_size must be >= 1, got {self.epochs}, {self.batch_size}"
            )
        if self.lr <= 0 or self.weight_decay < 0 or self.clip_norm <= 0:
            raise ValueError(f"need lr > 0, weight_decay >= 0, clip_norm > 0; got {self}")


def to_device(batch: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """A batch of :meth:`ConnectomeDataset.batch` on ``device``."""
    out = dict(batch)
    for key in ("sc", "fc", "node_mask", "y"):
        if out.get(key) is not None:
            out[key] = out[key].to(device)
    if out.get("features") is not None:
        out["features"] = out["features"].to(device)
    return out


def logits_of(model: nn.Module, batch: dict[str, Any]) -> torch.Tensor:
    param = next(model.parameters(), None)
    if param is not None and batch["sc"].device != param.device:
        batch = to_device(batch, param.device)
    out = model(batch["sc"], batch["fc"], features=batch["features"], node_mask=batch["node_mask"])
    return out.logits if isinstance(out, AFROutput) else out


def task_of(model: nn.Module) -> str:
    inner = getattr(model, "module", model)
    return str(getattr(inner, "task", "classification"))


def loss_of(model: nn.Module, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Cross-entropy (classification) or MSE (regression): the released code has no regulariser."""
    if task_of(model) == "regression":
        return nn.functional.mse_loss(logits, y.to(logits.dtype))
    return nn.functional.cross_entropy(logits, y.long())


def make_optimizer(
    model: nn.Module, config: TrainConfig
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
        optimizer, T_max=config.epochs, eta_min=config.eta_min
    )
    return optimizer, scheduler


def train_step(
    model: nn.Module, optimizer: torch.optim.Optimizer, batch: dict[str, Any], clip_norm: float
) -> float:
    """One optimisation step: loss, backward, clip the global grad norm, Adam."""
    optimizer.zero_grad(set_to_none=True)
    logits = logits_of(model, batch)
    loss = loss_of(model, logits, batch["y"].to(logits.device))
    if not torch.isfinite(loss):
        raise FloatingPointError(
            f"the training loss is {float(loss)}; lower lr or check the inputs"
        )
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), max_norm=clip_norm)
    optimizer.step()
    return float(loss.detach())


def batches(
    indices: Sequence[int], size: int, generator: torch.Generator | None
) -> Iterator[list[int]]:
    order = list(indices)
    if generator is not None:
        order = [order[i] for i in torch.randperm(len(order), generator=generator).tolist()]
    for start in range(0, len(order), size):
        yield order[start : start + size]


@torch.no_grad()
def predict_scores(
    model: nn.Module, data: ConnectomeDataset, batch_size: int = 64
) -> NDArray[np.float64]:
    """Class probabilities ``[B, C]`` (classification) or predictions ``[B]`` (regression), eval mode."""
    was_training = model.training
    model.eval()
    try:
        parts = []
        for idx in batches(range(len(data)), batch_size, None):
            logits = logits_of(model, data.batch(idx))
            if task_of(model) == "classification":
                logits = torch.softmax(logits, dim=-1)
            parts.append(logits.double().cpu().numpy())
        return np.concatenate(parts)
    finally:
        model.train(was_training)


def classification_metrics(y: NDArray[np.int64], proba: NDArray[np.float64]) -> dict[str, float]:
    """Accuracy, precision, recall, F1 (binary for two classes, macro otherwise) and ROC AUC."""
    from sklearn.metrics import (
        accuracy_score,
        f1_score,
        precision_score,
        recall_score,
        roc_auc_score,
    )

    labels = check_labels(y, proba.shape[1], name="y_true")
    pred = proba.argmax(1)
    average = "binary" if proba.shape[1] == 2 else "macro"
    auc = (
        roc_auc_score(labels, proba[:, 1])
        if proba.shape[1] == 2
        else roc_auc_score(labels, proba, multi_class="ovr")
    )
    return {
        "accuracy": float(accuracy_score(labels, pred)),
        "precision": float(precision_score(labels, pred, average=average, zero_division=0)),
        "recall": float(recall_score(labels, pred, average=average, zero_division=0)),
        "f1": float(f1_score(labels, pred, average=average, zero_division=0)),
        "auc": float(auc),
    }


def evaluate(model: nn.Module, data: ConnectomeDataset, batch_size: int = 64) -> dict[str, float]:
    if data.y is None:
        raise ValueError("evaluate needs a dataset with labels")
    scores = predict_scores(model, data, batch_size)
    y = data.y.numpy()
    if task_of(model) == "regression":
        mse = float(np.mean((scores - y) ** 2))
        return {"mse": mse, "r": float(np.corrcoef(scores, y)[0, 1])}
    return classification_metrics(y, scores)


@dataclasses.dataclass
class TrainResult:
    model: nn.Module
    best_epoch: int
    best_val: float
    history: list[dict[str, float]]


def fit(
    model: nn.Module,
    train: ConnectomeDataset,
    val: ConnectomeDataset | None = None,
    config: TrainConfig | None = None,
    *,
    on_epoch: Callable[[int, dict[str, float]], None] | None = None,
) -> TrainResult:
    """Train ``model`` with the official protocol; keep the weights of the best validation AUC
    (lowest validation MSE for regression; the last epoch without ``val``), loaded on return."""
    config = config or TrainConfig()
    if train.y is None:
        raise ValueError("fit needs a training set with labels")
    if task_of(model) == "classification":
        check_labels(train.y.numpy(), getattr(model, "num_classes", None), name="train labels")
        if val is not None and val.y is not None:
            check_labels(
                val.y.numpy(), getattr(model, "num_classes", None), name="validation labels"
            )
    torch.manual_seed(config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    optimizer, scheduler = make_optimizer(model, config)
    history: list[dict[str, float]] = []
    best_val, best_epoch, best_state = -np.inf, -1, None
    for epoch in range(config.epochs):
        model.train()
        losses = [
            train_step(model, optimizer, train.batch(idx), config.clip_norm)
            for idx in batches(range(len(train)), config.batch_size, generator)
        ]
        scheduler.step()
        row = {"epoch": float(epoch), "loss": float(np.mean(losses))}
        if val is not None:
            metrics = evaluate(model, val, config.batch_size)
            score = metrics["auc"] if "auc" in metrics else -metrics["mse"]
            row.update({f"val_{k}": v for k, v in metrics.items()})
            if score > best_val:
                best_val, best_epoch = score, epoch
                best_state = copy.deepcopy(model.state_dict())
        history.append(row)
        if on_epoch is not None:
            on_epoch(epoch, row)
    if best_state is not None:
        model.load_state_dict(best_state)
    else:
        best_epoch = config.epochs - 1
    return TrainResult(model, best_epoch, float(best_val), history)


@dataclasses.dataclass(frozen=True)
class Split:
    train: NDArray[np.int64]
    val: NDArray[np.int64]
    test: NDArray[np.int64]


def protocol_split(
    y: NDArray[np.int64],
    *,
    test_size: float = 0.3,
    val_size: float = 0.1,
    balance: bool = True,
    seed: int = DATA_SEED,
) -> Split:
    """The official split: down-sample the majority class to 1:1, stratified test 30 %, then a
    stratified validation 10 % of the training part, all with the fixed data seed."""
    from sklearn.model_selection import train_test_split

    labels = check_labels(y)
    rng = np.random.default_rng(seed)
    index = np.arange(labels.size)
    if balance:
        classes, counts = np.unique(labels, return_counts=True)
        keep = [rng.choice(index[labels == c], size=counts.min(), replace=False) for c in classes]
        index = np.sort(np.concatenate(keep))
    classes, counts = np.unique(labels[index], return_counts=True)
    if counts.min() < 3:
        c = int(classes[counts.argmin()])
        raise ValueError(
            f"class {c} has {int(counts.min())} subjects after balancing; a stratified "
            "train/validation/test split needs at least 3 per class"
        )
    rest, test = train_test_split(
        index, test_size=test_size, stratify=labels[index], random_state=seed % 2**32
    )
    train, val = train_test_split(
        rest, test_size=val_size, stratify=labels[rest], random_state=seed % 2**32
    )
    for name, part in (("train", train), ("validation", val), ("test", test)):
        check_labels(labels[part], name=f"{name} labels")
    return Split(np.sort(train), np.sort(val), np.sort(test))


def subset(data: ConnectomeDataset, index: NDArray[np.int64]) -> ConnectomeDataset:
    """A view of ``data`` on ``index`` sharing its tensors and cached features."""
    out = copy.copy(data)
    idx = torch.as_tensor(index, dtype=torch.long)
    out.sc, out.fc, out.node_mask = data.sc[idx], data.fc[idx], data.node_mask[idx]
    out.sizes = data.sizes[index]
    out.features = [data.features[int(i)] for i in index]
    out.y = None if data.y is None else data.y[idx]
    return out


def run_seeds(
    make_model: Callable[[int], nn.Module],
    data: ConnectomeDataset,
    split: Split,
    seeds: Sequence[int] = (0, 1, 2, 3, 4),
    config: TrainConfig | None = None,
) -> dict[str, Any]:
    """Train one model per init seed on the fixed split; test metrics per seed and mean ± std
    (ddof = 1), as ``run.py``. ``make_model(seed)`` builds a fresh model."""
    config = config or TrainConfig()
    train, val, test = subset(data, split.train), subset(data, split.val), subset(data, split.test)
    per_seed = []
    models = []
    for seed in seeds:
        torch.manual_seed(seed)
        model = make_model(seed)
        fit(model, train, val, dataclasses.replace(config, seed=seed))
        per_seed.append(evaluate(model, test, config.batch_size))
        models.append(model)
    keys = per_seed[0].keys()
    summary = {
        k: (
            float(np.mean([m[k] for m in per_seed])),
            float(np.std([m[k] for m in per_seed], ddof=1)) if len(per_seed) > 1 else 0.0,
        )
        for k in keys
    }
    return {"per_seed": per_seed, "mean_std": summary, "models": models}
