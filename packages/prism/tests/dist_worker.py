"""One rank of the two-process DistributedPrismMuon checks (run as a script by test_distributed.py).

    python dist_worker.py RANK MODE STORE OUT [timing]

Writes ``(params, orthogonalize_calls, compute_intervals)`` to OUT. With ``timing`` it trains four
512×512 matrices and records the wall-clock interval of each rank's orthogonalisation.
"""

import sys
import time

import torch
import torch.distributed as dist
from prism_matfn.distributed import DistributedPrismMuon

WORLD = 2
STEPS = 3
SHAPES = [(12, 8), (6, 10), (4, 3, 2, 2), (5,)]
TIMING_SHAPES = [(512, 512)] * 4


def make(shapes, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g) for s in shapes]


class Timed(DistributedPrismMuon):
    """Records ``(start, end)`` of each batch of orthogonalisations this rank computes."""

    intervals: list[tuple[float, float]]

    def _orthogonalize_many(self, items, updates):
        start = time.time()
        out = super()._orthogonalize_many(items, updates)
        if items:
            self.intervals.append((start, time.time()))
        return out


def main(rank, mode, store, out, timing=False):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    try:
        shapes = TIMING_SHAPES if timing else SHAPES
        full = make(shapes, 0)
        sharded = mode == "sharded"
        local = [
            p.chunk(WORLD)[rank].clone() if sharded and p.ndim >= 2 else p.clone() for p in full
        ]
        params = [torch.nn.Parameter(p) for p in local]
        opt = Timed(params, mode=mode, lr=0.05, weight_decay=0.1, adam_lr=1e-3)
        opt.intervals = []
        for step in range(STEPS):
            for p, g in zip(params, make(shapes, 100 + step), strict=True):
                p.grad = g.chunk(WORLD)[rank].clone() if sharded and g.ndim >= 2 else g
            opt.step()
        torch.save(([p.detach() for p in params], opt.orthogonalize_calls, opt.intervals), out)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], len(sys.argv) > 5)
