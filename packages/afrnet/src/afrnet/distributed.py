"""AFR-Net training under ``torch.distributed`` DDP with a ``DistributedSampler``.

Each rank trains on its shard of every global batch; DDP averages gradients, so with dropout off one
step equals a single-process step on the whole global batch (tested with gloo, two processes).

    torchrun --nproc-per-node 2 -m afrnet.distributed  # a self-check on a small synthetic cohort
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DistributedSampler

from afrnet.data import ConnectomeDataset
from afrnet.training import TrainConfig, make_optimizer, train_step


def disable_dropout(model: nn.Module) -> nn.Module:
    """Set every dropout probability of ``model`` to 0 (for exact comparisons); returns it."""
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
        elif isinstance(module, nn.MultiheadAttention):
            module.dropout = 0.0  # a float, not a Dropout module
    return model


def wrap(model: nn.Module) -> DistributedDataParallel:
    """DDP around ``model``; the m ≡ 1 ablation leaves the edge gate unused, so DDP is told."""
    unused = not getattr(model, "use_routing", True)
    return DistributedDataParallel(model, find_unused_parameters=unused)


def shard_batches(
    data: ConnectomeDataset, batch_size: int, epoch: int, seed: int
) -> list[list[int]]:
    """This rank's indices of each global batch of ``batch_size`` subjects (``DistributedSampler``
    order); ``batch_size`` must be a multiple of the world size."""
    world = dist.get_world_size()
    if batch_size % world:
        raise ValueError(
            f"the global batch_size {batch_size} must be a multiple of the world size {world}"
        )
    sampler: DistributedSampler[int] = DistributedSampler(
        data, shuffle=True, seed=seed, drop_last=False
    )
    sampler.set_epoch(epoch)
    local = list(sampler)
    per_rank = batch_size // world
    return [local[i : i + per_rank] for i in range(0, len(local), per_rank)]


def fit_distributed(
    model: nn.Module, train: ConnectomeDataset, config: TrainConfig | None = None
) -> list[float]:
    """Train ``model`` (already on this rank's device) for ``config.epochs`` under DDP; returns
    the mean loss of each epoch on this rank. Call inside an initialised process group."""
    config = config or TrainConfig()
    if not dist.is_initialized():
        raise RuntimeError("fit_distributed needs torch.distributed.init_process_group first")
    torch.manual_seed(config.seed)
    ddp = wrap(model)
    optimizer, scheduler = make_optimizer(ddp, config)
    losses = []
    for epoch in range(config.epochs):
        ddp.train()
        epoch_losses = [
            train_step(ddp, optimizer, train.batch(idx), config.clip_norm)
            for idx in shard_batches(train, config.batch_size, epoch, config.seed)
        ]
        scheduler.step()
        losses.append(float(np.mean(epoch_losses)))
    return losses


def _self_check() -> dict[str, Any]:
    """One DDP step on a tiny cohort against a single-process step on the same global batch."""
    from afrnet.data import synthetic_cohort
    from afrnet.model import AFRNet

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    cohort = synthetic_cohort(
        8, base="geometric", num_nodes=12, density=None, timepoints=100, seed=1
    )
    n = cohort.sc.shape[-1]
    data = ConnectomeDataset(cohort.sc, cohort.fc, cohort.y)
    torch.manual_seed(0)
    model = disable_dropout(AFRNet(n, d_model=16, nhead=2, dim_feedforward=32))
    reference = disable_dropout(AFRNet(n, d_model=16, nhead=2, dim_feedforward=32))
    reference.load_state_dict(model.state_dict())
    # SGD, not Adam: Adam's first step is lr * sign(g), which turns rounding noise on a near-zero
    # gradient into a full-lr difference; the gradients themselves are compared too.
    config = dataclasses.replace(TrainConfig(), batch_size=8, epochs=1)
    ddp = wrap(model)
    shards = shard_batches(data, config.batch_size, 0, config.seed)
    train_step(
        ddp, torch.optim.SGD(ddp.parameters(), lr=0.1), data.batch(shards[0]), config.clip_norm
    )
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, shards[0])
    global_batch = [i for part in gathered for i in part]
    train_step(
        reference, torch.optim.SGD(reference.parameters(), lr=0.1), data.batch(global_batch),
        config.clip_norm,
    )  # fmt: skip
    pairs = list(zip(model.parameters(), reference.parameters(), strict=True))
    scale = max(float(b.grad.abs().max()) for _, b in pairs if b.grad is not None)
    grad_gap = max(
        float((a.grad - b.grad).abs().max())
        for a, b in pairs
        if a.grad is not None and b.grad is not None
    )
    gap = max(float((a - b).abs().max()) for a, b in pairs)
    dist.destroy_process_group()
    return {"rank": rank, "world": world, "grad_rel_gap": grad_gap / scale, "max_param_gap": gap}


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    print(json.dumps(_self_check()))
