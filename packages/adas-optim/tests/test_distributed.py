"""AdaS on two CPU processes with gloo: DDP (replicated) and DTensor-sharded parameters (FSDP2's
layout) must step exactly as one process does, λ included.

The workers are fresh interpreters running this file as a script, not forked: forked workers hung
in CI's one shared pytest process once other packages' tests had started threads, and spawned ones
cannot unpickle a function of a test module imported with ``--import-mode=importlib``. One pair of
workers runs all three cases in one process group, so the interpreters start once for the module. This module
alone took 58 s of CPU (two fresh interpreters importing torch and torch.distributed.tensor), the
rest of the suite 37 s: together past the fast suite's 60 s, so the module is marked slow.
"""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from adas_optim import AdaS

WORLD = 2
STEPS = 4
HYPER = dict(lr=1e-2, gamma=1e-4, weight_decay=0.1)


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def batch(step, rank=None):
    g = torch.Generator().manual_seed(100 + step)
    x, y = torch.randn(8, 6, generator=g), torch.randn(8, 3, generator=g)
    return (x, y) if rank is None else (x.chunk(WORLD)[rank], y.chunk(WORLD)[rank])


def single_process():
    model = make_model()
    opt = AdaS(model.parameters(), **HYPER)
    for step in range(STEPS):
        opt.zero_grad()
        x, y = batch(step)
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    lams = [float(v) for v in opt.last_lambda.values()]
    return [p.detach().clone() for p in model.parameters()], lams


def ddp_case(rank):
    model = torch.nn.parallel.DistributedDataParallel(make_model())
    opt = AdaS(model.parameters(), **HYPER)
    for step in range(STEPS):
        opt.zero_grad()
        x, y = batch(step, rank)
        torch.nn.functional.mse_loss(model(x), y).backward()  # mean over halves = full mean
        opt.step()
    lams = [float(v) for v in opt.last_lambda.values()]
    return [p.detach() for p in model.parameters()], lams


def sharded_case(rank, foreach):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (WORLD,))
    full = [p.detach() for p in make_model().parameters()]
    # matrices sharded on dim 0, vectors replicated: λ needs the norms of the whole matrix
    params = [
        torch.nn.Parameter(distribute_tensor(p, mesh, [Shard(0) if p.ndim == 2 else Replicate()]))
        for p in full
    ]
    opt = AdaS(params, foreach=foreach, **HYPER)
    reference = make_model()
    for step in range(STEPS):
        x, y = batch(step)
        # the full gradient, computed alike on each rank, handed out as DTensor shards
        reference.zero_grad()
        with torch.no_grad():
            for r, p in zip(reference.parameters(), params, strict=True):
                r.copy_(p.full_tensor())
        torch.nn.functional.mse_loss(reference(x), y).backward()
        for r, p in zip(reference.parameters(), params, strict=True):
            p.grad = distribute_tensor(r.grad, mesh, p.placements)
        opt.step()
    lams = [float(v) for v in opt.last_lambda.values()]
    return [p.full_tensor() for p in params], lams


def worker(rank, store, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    try:
        results = {"ddp": ddp_case(rank)}
        if HAS_DTENSOR:
            for foreach in (False, True):
                results[f"sharded-foreach{foreach}"] = sharded_case(rank, foreach)
        torch.save(results, out)
    finally:
        dist.destroy_process_group()


HAS_DTENSOR = importlib.util.find_spec("torch.distributed.tensor") is not None
# Wall clock, for a hung worker (a spawned interpreter imports torch: seconds of CPU, but minutes of
# wall on a loaded machine); the workers' own CPU is a few seconds.
TIMEOUT_S = 600


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    """Per rank, ``{case: (parameters, λs)}`` after STEPS steps in two spawned gloo processes."""
    tmp = tmp_path_factory.mktemp("gloo")
    outs = [tmp / f"rank{r}.pt" for r in range(WORLD)]
    procs = [
        subprocess.Popen([sys.executable, __file__, str(r), str(tmp / "store"), str(outs[r])])
        for r in range(WORLD)
    ]
    try:
        codes = [proc.wait(timeout=TIMEOUT_S) for proc in procs]
    except subprocess.TimeoutExpired:
        for proc in procs:
            proc.kill()
        raise AssertionError(f"a worker still ran after {TIMEOUT_S} s: killed") from None
    assert codes == [0] * WORLD, f"a worker failed (see its stderr): exit codes {codes}"
    return [torch.load(o) for o in outs]


pytestmark = pytest.mark.slow  # spawned interpreters: see the module docstring

needs_gloo = pytest.mark.skipif(not dist.is_available(), reason="needs torch.distributed (gloo)")


@needs_gloo
def test_ddp_steps_equal_single_process(two_processes):
    expected, lams = single_process()
    assert min(lams) < 1.0  # the mixing is active, so λ is part of what is compared
    for results in two_processes:
        params, got_lams = results["ddp"]
        for p, e in zip(params, expected, strict=True):
            torch.testing.assert_close(p, e, atol=1e-6, rtol=1e-5)
        assert got_lams == pytest.approx(lams, rel=1e-5)


@needs_gloo
@pytest.mark.parametrize("foreach", [False, True])
def test_sharded_steps_equal_single_process(two_processes, foreach):
    if not HAS_DTENSOR:
        pytest.skip("needs torch.distributed.tensor")
    expected, lams = single_process()
    for results in two_processes:
        params, got_lams = results[f"sharded-foreach{foreach}"]
        for p, e in zip(params, expected, strict=True):
            torch.testing.assert_close(p, e, atol=1e-6, rtol=1e-5)
        assert got_lams == pytest.approx(lams, rel=1e-5)


if __name__ == "__main__":  # one worker: rank, store file, output file (see two_processes)
    worker(int(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
