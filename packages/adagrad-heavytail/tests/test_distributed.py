"""AdaGradNorm(scope="global") on sharded parameters: two gloo processes against one process."""

import multiprocessing
import sys

import pytest
import torch
import torch.distributed as dist
from adagrad_heavytail.optim import AdaGradNorm

WORLD = 2
STEPS = 4
SHAPES = [(6, 3), (4,), (2, 5)]


def full_params():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(s, generator=g, dtype=torch.float64) for s in SHAPES]


def full_grads(step):
    g = torch.Generator().manual_seed(10 + step)
    return [torch.randn(s, generator=g, dtype=torch.float64) for s in SHAPES]


def single_process():
    params = [torch.nn.Parameter(p) for p in full_params()]
    opt = AdaGradNorm(params, lr=0.3, eps=1e-3, scope="global")
    for step in range(STEPS):
        for p, g in zip(params, full_grads(step), strict=True):
            p.grad = g
        opt.step()
    return [p.detach() for p in params]


def worker(rank, mode, store, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    try:
        if mode == "process_group":  # FSDP-style: each rank owns a dim-0 half of every tensor
            params = [torch.nn.Parameter(p.chunk(WORLD)[rank].clone()) for p in full_params()]
            opt = AdaGradNorm(params, lr=0.3, eps=1e-3, process_group=dist.group.WORLD)
            for step in range(STEPS):
                for p, g in zip(params, full_grads(step), strict=True):
                    p.grad = g.chunk(WORLD)[rank].clone()
                opt.step()
            local = [p.detach() for p in params]
        else:  # DTensor, FSDP2's layout: Shard(0) parameters and gradients
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.tensor import Replicate, Shard, distribute_tensor

            mesh = init_device_mesh("cpu", (WORLD,))
            # the last tensor replicated: its copies must not be counted twice
            place = [[Shard(0)], [Shard(0)], [Replicate()]]
            params = [
                torch.nn.Parameter(distribute_tensor(p, mesh, pl))
                for p, pl in zip(full_params(), place, strict=True)
            ]
            opt = AdaGradNorm(params, lr=0.3, eps=1e-3)
            for step in range(STEPS):
                for p, g, pl in zip(params, full_grads(step), place, strict=True):
                    p.grad = distribute_tensor(g, mesh, pl)
                opt.step()
            local = [p.detach().full_tensor() for p in params]
        torch.save(local, out)
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(
    not dist.is_available() or sys.platform != "linux", reason="needs gloo and fork"
)
@pytest.mark.parametrize("mode", ["process_group", "dtensor"])
def test_sharded_global_norm_matches_one_process(mode, tmp_path):
    expected = single_process()
    ctx = multiprocessing.get_context("fork")
    store = tmp_path / "store"
    outs = [tmp_path / f"rank{r}.pt" for r in range(WORLD)]
    procs = [ctx.Process(target=worker, args=(r, mode, store, outs[r])) for r in range(WORLD)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
        assert proc.exitcode == 0, f"worker exited with {proc.exitcode}"
    for r in range(WORLD):
        got = torch.load(outs[r])
        for p, e in zip(got, expected, strict=True):
            want = e.chunk(WORLD)[r] if mode == "process_group" else e
            torch.testing.assert_close(p, want, atol=1e-12, rtol=0)


def test_unsharded_norm_on_one_rank_would_differ():
    # the control: a rank that used only its own shard's norm would step differently
    params = [torch.nn.Parameter(p.chunk(WORLD)[0].clone()) for p in full_params()]
    opt = AdaGradNorm(params, lr=0.3, eps=1e-3)
    for step in range(STEPS):
        for p, g in zip(params, full_grads(step), strict=True):
            p.grad = g.chunk(WORLD)[0].clone()
        opt.step()
    expected = single_process()
    assert not torch.allclose(params[0].detach(), expected[0].chunk(WORLD)[0])
