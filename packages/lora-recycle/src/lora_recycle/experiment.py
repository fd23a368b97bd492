"""The reproduction's arms on the synthetic hub: one target task in, test accuracies out.

Each trained arm keeps the lr of its best validation loss (20 held-out target examples) on its grid:
the adaptive arms share ``Budget.lrs``, the target LoRA has ``Budget.target_lrs``, π-Tuning its preset
lr and 10× (its A/B train too); LoraHub is gradient-free.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from lora_recycle import presets
from lora_recycle.adapters import LoraExpert
from lora_recycle.interop import train_target_lora
from lora_recycle.merges import apply_task_vector, merge_task_vectors
from lora_recycle.model import AdaptiveMergeConfig, get_adaptive_merge_model
from lora_recycle.pool import LoraPool
from lora_recycle.selection import select_experts
from lora_recycle.synthetic import accuracy, as_examples, mean_loss
from lora_recycle.training import train_adaptive_merge


@dataclass
class TargetData:
    train: tuple[torch.Tensor, torch.Tensor]
    valid: tuple[torch.Tensor, torch.Tensor]
    test: tuple[torch.Tensor, torch.Tensor]


@dataclass
class Budget:
    max_steps: int
    lrs: Sequence[float]
    target_lrs: Sequence[float]
    target_steps: int
    target_rank: int
    lorahub_budget: int
    k: int
    seed: int = 0


def adaptive_arm(
    base: nn.Module,
    pool: LoraPool,
    config: AdaptiveMergeConfig,
    data: TargetData,
    budget: Budget,
    lrs: Sequence[float] | None = None,
) -> dict[str, float]:
    """Train the merge at each lr; keep the best validation loss; its test accuracy."""
    best: dict[str, float] | None = None
    for lr in lrs or budget.lrs:
        model = get_adaptive_merge_model(copy.deepcopy(base), pool, config)
        result = train_adaptive_merge(
            model,
            as_examples(*data.train),
            as_examples(*data.valid),
            lr=lr,
            max_steps=budget.max_steps,
            batch_size=8,
            grad_accum=1,
            seed=budget.seed,
        )
        if best is None or result.best_eval_loss < best["valid_loss"]:
            best = {
                "valid_loss": result.best_eval_loss,
                "accuracy": accuracy(model, *data.test),
                "lr": lr,
                "best_step": result.best_step,
            }
    assert best is not None
    return best


def static_arm(
    base: nn.Module, task_vector: dict[str, torch.Tensor], data: TargetData
) -> dict[str, float]:
    model = apply_task_vector(copy.deepcopy(base), task_vector)
    return {"valid_loss": mean_loss(model, *data.valid), "accuracy": accuracy(model, *data.test)}


def target_lora_arm(
    base: nn.Module, data: TargetData, budget: Budget
) -> tuple[dict[str, float], LoraExpert]:
    """The target-task LoRA (peft; spec hyper-parameters but the rank), lr picked on validation."""
    best: tuple[dict[str, float], LoraExpert] | None = None
    for lr in budget.target_lrs:
        expert = train_target_lora(
            copy.deepcopy(base),
            as_examples(*data.train),
            r=budget.target_rank,
            lr=lr,
            steps=budget.target_steps,
            seed=budget.seed,
        )
        row = static_arm(base, merge_task_vectors([expert], "sum"), data)
        row["lr"] = lr
        if best is None or row["valid_loss"] < best[0]["valid_loss"]:
            best = (row, expert)
    assert best is not None
    return best


def lorahub_arm(
    base: nn.Module, experts: list[LoraExpert], data: TargetData, budget: Budget
) -> dict[str, float]:
    """LoraHub over the target LoRA + K−1 pool LoRAs; objective = loss on all 100 examples (+ L1)."""
    x = torch.cat([data.train[0], data.valid[0]])
    y = torch.cat([data.train[1], data.valid[1]])
    result = presets.lorahub(budget=budget.lorahub_budget).run(
        copy.deepcopy(base), experts, lambda model: mean_loss(model, x, y)
    )
    row = static_arm(base, result.task_vector, data)
    row["optimizer"] = result.optimizer  # type: ignore[assignment]
    return row


def evaluation_scores(base: nn.Module, pool: LoraPool, data: TargetData) -> dict[str, float]:
    """Each pool LoRA's own accuracy on the target's training examples (the "evaluation" selection)."""
    return {
        e.adapter_id: accuracy(
            apply_task_vector(copy.deepcopy(base), merge_task_vectors([e], "sum")), *data.train
        )
        for e in pool
    }


def run_target(
    base: nn.Module,
    pool: LoraPool,
    related: LoraExpert,
    data: TargetData,
    budget: Budget,
    tick: Callable[[str], Any] = lambda name: None,
) -> dict[str, dict[str, float]]:
    """Every arm of spec §5 for one target task."""
    rows: dict[str, dict[str, float]] = {"base": static_arm(base, {}, data)}
    tick("target LoRA")
    rows["target_lora"], target = target_lora_arm(base, data, budget)
    random_sel = select_experts(pool, budget.k, "random", seed=budget.seed)
    tick("ours")
    rows["ours"] = adaptive_arm(base, random_sel, presets.ours().config, data, budget)
    tick("adamerging")
    rows["adamerging"] = adaptive_arm(base, random_sel, presets.adamerging().config, data, budget)
    tick("pi_tuning")
    with_target = select_experts(pool, budget.k, "random", target_lora=target, seed=budget.seed)
    pi = presets.pi_tuning()
    rows["pi_tuning"] = adaptive_arm(
        base, with_target, pi.config, data, budget, lrs=[pi.lr, 10 * pi.lr]
    )
    tick("lorahub")
    same_rank = [e for e in random_sel if e.rank == target.rank]
    hub_experts = [target, *same_rank[: budget.k - 1]] if same_rank else [target]
    rows["lorahub"] = lorahub_arm(
        base, hub_experts if len(hub_experts) > 1 else [target], data, budget
    )
    tick("static merges")
    for method in ("avg", "ties", "tsv"):
        rows[method] = static_arm(base, merge_task_vectors(random_sel, method), data)
    tick("random-init pool")
    rows["random_init"] = adaptive_arm(
        base, random_sel, presets.ours(reinit="all").config, data, budget
    )
    tick("related LoRA in pool")
    rows["ours_related"] = adaptive_arm(
        base,
        random_sel.with_experts([related, *list(random_sel)[1:]]),
        presets.ours().config,
        data,
        budget,
    )
    tick("selection: cosine")
    rows["select_cosine"] = adaptive_arm(
        base,
        select_experts(pool, budget.k, "cosine", target_lora=target, include_target=False),
        presets.ours().config,
        data,
        budget,
    )
    tick("selection: evaluation")
    scores = evaluation_scores(base, pool, data)
    rows["select_evaluation"] = adaptive_arm(
        base,
        select_experts(pool, budget.k, "evaluation", scores=scores),
        presets.ours().config,
        data,
        budget,
    )
    return rows


def beats_base_search(
    hubs: dict[str, tuple[nn.Module, LoraPool]],
    data: TargetData,
    budget: Budget,
    steps: Sequence[int],
) -> list[dict[str, Any]]:
    """``ours`` − base on test accuracy for each (base calibration, steps, lr): where does it win?

    Each calibration has its own base and its own pool (trained on that base)."""
    rows = []
    for calibration, (base, pool) in hubs.items():
        selection = select_experts(pool, budget.k, "random", seed=budget.seed)
        base_acc = accuracy(base, *data.test)
        for n_steps in steps:
            for lr in budget.lrs:
                arm = adaptive_arm(
                    base,
                    selection,
                    presets.ours().config,
                    data,
                    Budget(**{**budget.__dict__, "max_steps": n_steps}),
                    lrs=[lr],
                )
                rows.append(
                    {
                        "calibration": calibration,
                        "steps": n_steps,
                        "lr": lr,
                        "base": base_acc,
                        "ours": arm["accuracy"],
                        "gain": arm["accuracy"] - base_acc,
                        "best_step": arm["best_step"],
                    }
                )
    return rows
