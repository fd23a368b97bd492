"""DistributedPrismMuon on CPU with gloo and two forked processes, against single-process PrismMuon."""

import multiprocessing
import sys

import pytest
import torch
import torch.distributed as dist
from prism_matfn.distributed import DistributedPrismMuon
from prism_matfn.optim import PrismMuon

WORLD = 2
STEPS = 3


def shapes():
    return [(12, 8), (6, 10), (4, 3, 2, 2), (5,)]


def make_params():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(s, generator=g) for s in shapes()]


def grads(step):
    g = torch.Generator().manual_seed(100 + step)
    return [torch.randn(s, generator=g) for s in shapes()]


def single_process():
    params = [torch.nn.Parameter(p) for p in make_params()]
    opt = PrismMuon(params, lr=0.05, weight_decay=0.1)
    for step in range(STEPS):
        for p, g in zip(params, grads(step), strict=True):
            p.grad = g
        opt.step()
    return [p.detach() for p in params], opt.orthogonalize_calls


def worker(rank, mode, store, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    try:
        full = make_params()
        if mode == "sharded":  # each rank holds a dim-0 half of each matrix; vectors stay whole
            local = [p.chunk(WORLD)[rank].clone() if p.ndim >= 2 else p.clone() for p in full]
        else:
            local = [p.clone() for p in full]
        params = [torch.nn.Parameter(p) for p in local]
        opt = DistributedPrismMuon(params, mode=mode, lr=0.05, weight_decay=0.1)
        for step in range(STEPS):
            for p, g in zip(params, grads(step), strict=True):
                p.grad = g.chunk(WORLD)[rank].clone() if (mode == "sharded" and g.ndim >= 2) else g
            opt.step()
        torch.save(([p.detach() for p in params], opt.orthogonalize_calls), out)
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(
    not dist.is_available() or sys.platform != "linux", reason="needs gloo and fork"
)
@pytest.mark.parametrize("mode", ["replicated", "sharded"])
def test_distributed_matches_single_process(mode, tmp_path):
    expected, calls = single_process()
    ctx = multiprocessing.get_context("fork")  # no re-import of torch in the children: fast
    store = tmp_path / "store"
    outs = [tmp_path / f"rank{r}.pt" for r in range(WORLD)]
    procs = [ctx.Process(target=worker, args=(r, mode, store, outs[r])) for r in range(WORLD)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0, f"worker exited with {proc.exitcode}"
    results = [torch.load(o) for o in outs]
    for r, (params, _) in enumerate(results):
        for p, e in zip(params, expected, strict=True):
            want = e.chunk(WORLD)[r] if (mode == "sharded" and e.ndim >= 2) else e
            torch.testing.assert_close(p, want, atol=1e-5, rtol=1e-5)
    # the matrix work is split: each rank orthogonalised only its own share, none twice
    assert sum(c for _, c in results) == calls
    assert all(c < calls for _, c in results)


def test_needs_an_initialised_group():
    if dist.is_initialized():
        pytest.skip("a process group is already initialised")
    with pytest.raises(RuntimeError, match="init_process_group"):
        DistributedPrismMuon([torch.nn.Parameter(torch.zeros(2, 2))])
