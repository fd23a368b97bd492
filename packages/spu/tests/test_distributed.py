"""DDP on CPU: two gloo ranks, each on half of the global batch, end where one process on the whole
batch ends (forked ranks; a rank that does not finish is killed, never waited on)."""

import multiprocessing
import sys

import pytest
import torch
import torch.distributed as dist
from spu_dna import SPUConfig, SPUForSequenceClassification

WORLD, STEPS, BATCH, LENGTH = 2, 3, 8, 24

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not dist.is_available() or sys.platform != "linux", reason="gloo on linux"),
]


def _model():
    torch.manual_seed(0)
    config = SPUConfig(d_model=16, n_layers=2, lpl_groups=4, dpl_max_len=LENGTH, dropout=0.0)
    return SPUForSequenceClassification(config)


def _batches():
    g = torch.Generator().manual_seed(1)
    return [
        (
            torch.randint(5, 9, (BATCH, LENGTH), generator=g),
            torch.randint(0, 2, (BATCH,), generator=g),
        )
        for _ in range(STEPS)
    ]


def _train(model, batches, rank=0, world=1):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    share = BATCH // world
    for ids, labels in batches:
        part = slice(rank * share, (rank + 1) * share)
        loss = model(input_ids=ids[part], labels=labels[part]).loss
        opt.zero_grad()
        loss.backward()
        opt.step()


def _rank(rank, store, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    try:
        model = torch.nn.parallel.DistributedDataParallel(_model())
        _train(model, _batches(), rank, WORLD)
        if rank == 0:
            torch.save(model.module.state_dict(), out)
    finally:
        dist.destroy_process_group()


def test_ddp_two_ranks_match_one_process_on_the_same_global_batch(tmp_path):
    out = tmp_path / "ddp.pt"
    ctx = multiprocessing.get_context("fork")
    procs = [
        ctx.Process(target=_rank, args=(r, str(tmp_path / "store"), str(out))) for r in range(WORLD)
    ]
    for proc in procs:
        proc.start()
    try:
        for proc in procs:
            proc.join(timeout=120)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
    assert all(proc.exitcode == 0 for proc in procs), [proc.exitcode for proc in procs]
    single = _model()
    start = {k: v.clone() for k, v in single.state_dict().items()}
    _train(single, _batches())
    ddp = torch.load(out)
    for name, value in single.state_dict().items():
        torch.testing.assert_close(ddp[name], value, atol=1e-5, rtol=1e-4, msg=name)
    assert any(not torch.equal(start[k], v) for k, v in single.state_dict().items())  # it trained
