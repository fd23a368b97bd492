"""Train an SPU classifier a few SGD steps; alone, or as one rank of a torchrun (gloo) group.

    python spu_ddp_worker.py OUT.pt                                    # one process, whole batch
    python -m torch.distributed.run --standalone --nproc_per_node 2 spu_ddp_worker.py OUT.pt  # DDP

Every rank takes its share of the same global batch, so DDP's averaged gradient equals the one
process's: rank 0 writes the trained state dict for the test to compare. Each process writes its pid
to ``OUT.pid.<rank>`` first, so that a test that times out can kill every worker, not only torchrun.
"""

import datetime
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from spu_dna import SPUConfig, SPUForSequenceClassification

STEPS, BATCH, LENGTH = 3, 8, 24
# A rank whose peer died fails its rendezvous or collective after this, instead of gloo's 30 minutes
PEER_TIMEOUT = datetime.timedelta(seconds=60)


def main(out: str) -> None:
    torch.set_num_threads(1)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    Path(f"{out}.pid.{rank}").write_text(str(os.getpid()))
    torch.manual_seed(0)
    config = SPUConfig(d_model=16, n_layers=2, lpl_groups=4, dpl_max_len=LENGTH, dropout=0.0)
    model: torch.nn.Module = SPUForSequenceClassification(config)
    if world > 1:
        dist.init_process_group("gloo", timeout=PEER_TIMEOUT)
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    share = slice(rank * BATCH // world, (rank + 1) * BATCH // world)
    for _ in range(STEPS):
        ids = torch.randint(5, 9, (BATCH, LENGTH), generator=g)
        labels = torch.randint(0, 2, (BATCH,), generator=g)
        loss = model(input_ids=ids[share], labels=labels[share]).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    if rank == 0:
        trained = model.module if world > 1 else model
        torch.save(trained.state_dict(), out)
    if world > 1:
        # Leave together: a rank that tears down while its peer still works (rank 0 saving) left
        # that peer blocked in destroy_process_group under load (seen 2026-12-08).
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
