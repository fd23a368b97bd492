"""The peers' fine-tuning protocol (Caduceus's genomic-benchmark config) and MLM pre-training.

AdamW, weight decay 0.1, cosine schedule with 1 % linear warm-up down to 0.1 x the peak learning
rate, gradient clipping at 1.0, optional reverse-complement augmentation. Works for every model whose
``forward(input_ids, attention_mask, labels)`` returns an output with ``loss`` and ``logits``.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import torch
from torch import nn

from spu_dna.data.synthetic import Task
from spu_dna.modeling import reverse_complement_ids

__all__ = ["Protocol", "auroc", "evaluate", "fit", "mask_for_mlm", "pretrain_mlm"]


@dataclasses.dataclass(frozen=True)
class Protocol:
    """Caduceus's fine-tuning hyper-parameters; ``epochs`` and ``batch_size`` scale to the budget."""

    lr: float = 6e-4
    weight_decay: float = 0.1
    epochs: int = 100
    batch_size: int = 128
    warmup: float = 0.01
    min_lr_ratio: float = 0.1
    clip: float = 1.0
    rc_augment: bool = False


def _schedule(protocol: Protocol, total: int) -> Callable[[int], float]:
    warm = max(1, round(protocol.warmup * total))

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        progress = min(1.0, (step - warm) / max(1, total - warm))
        cosine = 0.5 * (1 + math.cos(math.pi * progress))
        return protocol.min_lr_ratio + (1 - protocol.min_lr_ratio) * cosine

    return factor


def _train(
    model: nn.Module,
    batches: Callable[[torch.Generator], Iterable[dict[str, torch.Tensor]]],
    steps_per_epoch: int,
    protocol: Protocol,
    seed: int,
    on_epoch: Callable[[int, float], None] | None = None,
) -> list[float]:
    """The loop both entry points share; returns seconds per epoch."""
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=protocol.lr, weight_decay=protocol.weight_decay
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, _schedule(protocol, protocol.epochs * steps_per_epoch)
    )
    seconds = []
    device = next(model.parameters()).device
    model.train()
    for epoch in range(protocol.epochs):
        start = time.perf_counter()
        loss = torch.tensor(float("nan"))
        for batch in batches(generator):
            loss = model(**{k: v.to(device) for k, v in batch.items()}).loss
            if not torch.isfinite(loss):
                raise FloatingPointError(f"non-finite training loss {loss.item()} at epoch {epoch}")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), protocol.clip)
            optimizer.step()
            scheduler.step()
        seconds.append(time.perf_counter() - start)
        if on_epoch is not None:
            on_epoch(epoch, loss.item())
    model.eval()
    return seconds


def fit(
    model: nn.Module,
    task: Task,
    protocol: Protocol = Protocol(),
    seed: int = 0,
    on_epoch: Callable[[int, float], None] | None = None,
) -> list[float]:
    """Fine-tune a sequence classifier on ``task``; returns seconds per epoch."""
    ids, labels = task.input_ids(), torch.from_numpy(task.labels).long()

    def batches(generator: torch.Generator) -> Iterable[dict[str, torch.Tensor]]:
        order = torch.randperm(len(ids), generator=generator)
        for chunk in order.split(protocol.batch_size):
            x = ids[chunk]
            if protocol.rc_augment:
                flip = torch.rand(len(chunk), generator=generator) < 0.5
                x = torch.where(flip.unsqueeze(1), reverse_complement_ids(x), x)
            yield {"input_ids": x, "labels": labels[chunk]}

    steps = math.ceil(len(ids) / protocol.batch_size)
    return _train(model, batches, steps, protocol, seed, on_epoch)


def mask_for_mlm(
    input_ids: torch.Tensor,
    generator: torch.Generator,
    probability: float = 0.15,
    mask_token_id: int = 3,
    vocab_size: int = 10,
    first_base_id: int = 5,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT masking: ``probability`` of the bases become targets; of those 80 % turn ``[MASK]``,
    10 % a random base, 10 % stay. Returns ``(inputs, labels)`` with labels -100 off target."""
    target = (torch.rand(input_ids.shape, generator=generator) < probability) & (
        input_ids >= first_base_id
    )
    labels = torch.where(target, input_ids, torch.full_like(input_ids, -100))
    draw = torch.rand(input_ids.shape, generator=generator)
    random_base = torch.randint(first_base_id, vocab_size - 1, input_ids.shape, generator=generator)
    inputs = torch.where(
        target & (draw < 0.8), torch.full_like(input_ids, mask_token_id), input_ids
    )
    inputs = torch.where(target & (draw >= 0.8) & (draw < 0.9), random_base, inputs)
    return inputs, labels


def pretrain_mlm(
    model: nn.Module, input_ids: torch.Tensor, protocol: Protocol = Protocol(), seed: int = 0
) -> list[float]:
    """Masked-language-model pre-training of an :class:`~spu_dna.SPUForMaskedLM` on ``input_ids``."""

    def batches(generator: torch.Generator) -> Iterable[dict[str, torch.Tensor]]:
        order = torch.randperm(len(input_ids), generator=generator)
        for chunk in order.split(protocol.batch_size):
            inputs, labels = mask_for_mlm(input_ids[chunk], generator)
            yield {"input_ids": inputs, "labels": labels}

    steps = math.ceil(len(input_ids) / protocol.batch_size)
    return _train(model, batches, steps, protocol, seed)


def auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve by the rank-sum (Mann-Whitney) formula, ties counted half."""
    scores, labels = np.asarray(scores, dtype=float), np.asarray(labels).astype(bool)
    pos, neg = scores[labels], scores[~labels]
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    order = np.argsort(np.concatenate([pos, neg]), kind="mergesort")
    ranks = np.empty(len(order))
    ranks[order] = np.arange(1, len(order) + 1)
    allscores = np.concatenate([pos, neg])
    for value in np.unique(allscores):  # average ranks over ties
        tied = allscores == value
        ranks[tied] = ranks[tied].mean()
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


@torch.no_grad()
def evaluate(model: nn.Module, task: Task, batch_size: int = 256) -> dict[str, Any]:
    """Accuracy and AUROC of a two-class classifier on ``task``."""
    model.eval()
    ids, device = task.input_ids(), next(model.parameters()).device
    logits = torch.cat(
        [model(input_ids=chunk.to(device)).logits.cpu() for chunk in ids.split(batch_size)]
    )
    scores = (logits[:, 1] - logits[:, 0]).numpy()
    predictions = logits.argmax(dim=1).numpy()
    return {
        "accuracy": float((predictions == task.labels).mean()),
        "auroc": auroc(scores, task.labels),
        "n": len(task),
    }
