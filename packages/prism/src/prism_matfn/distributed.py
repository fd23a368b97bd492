"""PrismMuon across ``torch.distributed`` ranks.

Two layouts, as distributed Muon implementations have them:

- ``mode="replicated"`` (DDP): every rank holds the whole parameter and the same all-reduced gradient.
  Momentum is elementwise, so every rank keeps it; the polar factors are split round-robin — rank
  ``k % world`` orthogonalises the ``k``-th matrix — and broadcast, so each rank does ``1/world`` of the
  matrix work.
- ``mode="sharded"`` (FSDP-style): every rank holds an equal dim-0 shard of each Muon matrix. The
  momentum-blended shards are gathered to the matrix's owner, orthogonalised as one matrix (the polar
  factor is not row-separable), and scattered back. Every collective is posted asynchronously: all
  gathers, then each rank orthogonalises its own matrices (batched by shape) while the others are in
  flight, then all scatters, so the ranks compute at the same time.

AdamW parameters are updated locally on every rank, as in :class:`~prism_matfn.optim.PrismMuon`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
import torch.distributed as dist

from prism_matfn.optim.muon import Item, PrismMuon

MODES: tuple[str, ...] = ("replicated", "sharded")


class DistributedPrismMuon(PrismMuon):
    """:class:`PrismMuon` whose polar factors are shared out across the ranks of ``process_group``.

    Needs an initialised process group (any backend that has broadcast, gather and scatter: gloo on
    CPU, NCCL on GPU). Every rank must construct it with the parameters in the same order. Other
    arguments as :class:`PrismMuon`.
    """

    def __init__(
        self,
        params: Iterable[Any],
        *,
        mode: str = "replicated",
        process_group: dist.ProcessGroup | None = None,
        **kwargs: Any,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError(
                "DistributedPrismMuon needs torch.distributed.init_process_group first"
            )
        super().__init__(params, **kwargs)
        self.mode = mode
        self.process_group = process_group
        if mode == "sharded":
            self._check_equal_shards()

    def _check_equal_shards(self) -> None:
        """Sharded mode gathers equal dim-0 shards (``gather``/``scatter`` need equal sizes): refuse
        anything else at construction, naming the parameter and the rows each rank holds."""
        rows = [int(p.shape[0]) for g in self.param_groups if g["use_muon"] for p in g["params"]]
        mine = torch.tensor(rows, dtype=torch.int64)
        world = dist.get_world_size(self.process_group)
        every = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(every, mine, group=self.process_group)
        for k in range(len(rows)):
            per_rank = [int(t[k]) for t in every]
            if len(set(per_rank)) > 1 or per_rank[0] < 1:
                raise ValueError(
                    f"mode='sharded' needs every rank to hold an equal, non-empty dim-0 shard of each "
                    f"matrix; Muon parameter {k} has rows {per_rank} across the {world} ranks (pad "
                    "the matrix to a multiple of the world size, or use mode='replicated')"
                )

    def _owner(self, k: int) -> tuple[bool, int]:
        """Whether this rank owns the ``k``-th matrix, and the owner's global rank."""
        world = dist.get_world_size(self.process_group)
        owner = k % world
        global_owner = (
            owner if self.process_group is None else dist.get_global_rank(self.process_group, owner)
        )
        return dist.get_rank(self.process_group) == owner, global_owner

    def _muon_step(self, items: list[Item]) -> None:
        if self.mode == "replicated":
            self._replicated_step(items)
        else:
            self._sharded_step(items)

    def _replicated_step(self, items: list[Item]) -> None:
        updates = [self._momentum_update(p, group) for p, group, _ in items]
        mine = [k for k in range(len(items)) if self._owner(k)[0]]
        # Every rank computes its own share (batched by shape) before any broadcast.
        computed = self._orthogonalize_many([items[k] for k in mine], [updates[k] for k in mine])
        outs = [torch.empty(u.shape, dtype=torch.float32, device=u.device) for u in updates]
        for k, O in zip(mine, computed, strict=True):
            outs[k] = O.contiguous()  # a collective sends raw storage (O may be a transposed view)
        handles = [
            dist.broadcast(O, src=self._owner(k)[1], group=self.process_group, async_op=True)
            for k, O in enumerate(outs)
        ]
        for handle in handles:
            handle.wait()
        for (p, group, _), O in zip(items, outs, strict=True):
            self._apply(p, group, O)

    def _sharded_step(self, items: list[Item]) -> None:
        """Post every gather at once, orthogonalise the owned matrices while the others' travel,
        then post every scatter: the ranks compute at the same time instead of taking turns."""
        world = dist.get_world_size(self.process_group)
        shards = [self._momentum_update(p, group).float().contiguous() for p, group, _ in items]
        gathered: dict[int, list[torch.Tensor]] = {}
        handles = []
        for k, shard in enumerate(shards):
            mine, owner = self._owner(k)
            pieces = [torch.empty_like(shard) for _ in range(world)] if mine else None
            if pieces is not None:
                gathered[k] = pieces
            handles.append(
                dist.gather(shard, pieces, dst=owner, group=self.process_group, async_op=True)
            )
        mine_ks = sorted(gathered)
        for k in mine_ks:
            handles[k].wait()
        full = [torch.cat(gathered[k], dim=0) for k in mine_ks]
        computed = self._orthogonalize_many([items[k] for k in mine_ks], full)
        chunks = {k: [c.contiguous() for c in O.chunk(world, dim=0)]
                  for k, O in zip(mine_ks, computed, strict=True)}  # fmt: skip
        for k in range(len(items)):
            if k not in gathered:
                handles[k].wait()
        outs = [torch.empty_like(shard) for shard in shards]
        scatters = [
            dist.scatter(out, chunks.get(k), src=self._owner(k)[1], group=self.process_group,
                         async_op=True)
            for k, out in enumerate(outs)
        ]  # fmt: skip
        for handle in scatters:
            handle.wait()
        for (p, group, _), out in zip(items, outs, strict=True):
            self._apply(p, group, out)
