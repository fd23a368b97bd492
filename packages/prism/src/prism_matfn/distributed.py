"""PrismMuon across ``torch.distributed`` ranks.

Two layouts, as distributed Muon implementations have them:

- ``mode="replicated"`` (DDP): every rank holds the whole parameter and the same all-reduced gradient.
  Momentum is elementwise, so every rank keeps it; the polar factors are split round-robin — rank
  ``k % world`` orthogonalises the ``k``-th matrix — and broadcast, so each rank does ``1/world`` of the
  matrix work.
- ``mode="sharded"`` (FSDP-style): every rank holds an equal dim-0 shard of each Muon matrix. The
  momentum-blended shards are gathered to the matrix's owner, orthogonalised as one matrix (the polar
  factor is not row-separable), and scattered back: gather–orthogonalise–scatter.

AdamW parameters are updated locally on every rank, as in :class:`~prism_matfn.optim.PrismMuon`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
import torch.distributed as dist

from prism_matfn.optim.muon import PrismMuon

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

    def _owner(self, k: int) -> tuple[bool, int]:
        """Whether this rank owns the ``k``-th matrix, and the owner's global rank."""
        world = dist.get_world_size(self.process_group)
        owner = k % world
        global_owner = (
            owner if self.process_group is None else dist.get_global_rank(self.process_group, owner)
        )
        return dist.get_rank(self.process_group) == owner, global_owner

    def _muon_step(self, items: list[tuple[torch.Tensor, dict[str, Any], int]]) -> None:
        if self.mode == "replicated":
            self._replicated_step(items)
        else:
            self._sharded_step(items)

    def _replicated_step(self, items: list[tuple[torch.Tensor, dict[str, Any], int]]) -> None:
        outs, handles = [], []
        for k, (p, group, index) in enumerate(items):
            update = self._momentum_update(p, group)
            mine, _ = self._owner(k)
            if mine:
                # contiguous: a collective sends raw storage (polar of a wide matrix is a transposed view)
                O = self._orthogonalize_counted(p, update, group, index).contiguous()
            else:
                O = torch.empty(update.shape, dtype=torch.float32, device=update.device)
            outs.append(O)
        # Every rank has computed its own share before any broadcast, so the shares run in parallel.
        for k, O in enumerate(outs):
            _, src = self._owner(k)
            handles.append(dist.broadcast(O, src=src, group=self.process_group, async_op=True))
        for handle in handles:
            handle.wait()
        for (p, group, _), O in zip(items, outs, strict=True):
            self._apply(p, group, O)

    def _sharded_step(self, items: list[tuple[torch.Tensor, dict[str, Any], int]]) -> None:
        world = dist.get_world_size(self.process_group)
        for k, (p, group, index) in enumerate(items):
            shard = self._momentum_update(p, group).float().contiguous()
            mine, owner = self._owner(k)
            pieces = [torch.empty_like(shard) for _ in range(world)] if mine else None
            dist.gather(shard, pieces, dst=owner, group=self.process_group)
            chunks = None
            if pieces is not None:  # this rank owns the matrix
                full = torch.cat(pieces, dim=0)
                O = self._orthogonalize_counted(p, full, group, index)
                chunks = [c.contiguous() for c in O.chunk(world, dim=0)]
            out = torch.empty_like(shard)
            dist.scatter(out, chunks, src=owner, group=self.process_group)
            self._apply(p, group, out)
