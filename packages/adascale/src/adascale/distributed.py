"""``torch.distributed`` support: every rank sees the whole fit set's statistics and all scores.

Under an initialised process group (each rank fed a shard by a ``DistributedSampler``), the fit
statistics (AdaSCALE's features, ReAct's activations, OptFS's features) and the evaluation scores
are all-gathered, so every rank builds the same ECDF and the same metrics as one process would. Ranks
may hold different row counts (the last shard may be short). Outside a process group these are
identities.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def gather_rows(t: Tensor) -> Tensor:
    """Concatenate ``t`` (rows first) from every rank in rank order; ``t`` itself outside a group."""
    if not is_distributed():
        return t
    world = dist.get_world_size()
    count = torch.tensor([t.shape[0]], device=t.device)
    counts = [torch.zeros_like(count) for _ in range(world)]
    dist.all_gather(counts, count)
    longest = int(max(c.item() for c in counts))
    padded = t.new_zeros((longest, *t.shape[1:]))
    padded[: t.shape[0]] = t
    parts = [torch.zeros_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded.contiguous())
    return torch.cat([p[: int(c.item())] for p, c in zip(parts, counts, strict=True)])
