"""DistributedPrismMuon on CPU with gloo: two forked ranks running tests/dist_worker.py's ``main``
(fork: no torch re-import, nothing to unpickle), against single-process PrismMuon, and a timing check
that the ranks compute at the same time. A rank that does not finish is killed, never waited on."""

import importlib.util
import multiprocessing
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from prism_matfn.distributed import DistributedPrismMuon
from prism_matfn.optim import PrismMuon

WORKER = Path(__file__).resolve().parent / "dist_worker.py"
WORLD, STEPS = 2, 3
SHAPES = [(12, 8), (6, 10), (4, 3, 2, 2), (5,)]

needs_gloo = pytest.mark.skipif(
    not dist.is_available() or sys.platform != "linux", reason="needs gloo on linux"
)


def make(shapes, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g) for s in shapes]


def single_process():
    params = [torch.nn.Parameter(p) for p in make(SHAPES, 0)]
    opt = PrismMuon(params, lr=0.05, weight_decay=0.1, adam_lr=1e-3)
    for step in range(STEPS):
        for p, g in zip(params, make(SHAPES, 100 + step), strict=True):
            p.grad = g
        opt.step()
    return [p.detach() for p in params], opt.orthogonalize_calls


def _worker_module():
    spec = importlib.util.spec_from_file_location("prism_dist_worker", WORKER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_ranks(mode, tmp_path, timing=False, timeout=120):
    main = _worker_module().main
    store = tmp_path / "store"
    outs = [tmp_path / f"rank{r}.pt" for r in range(WORLD)]
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=main, args=(r, mode, str(store), str(outs[r]), timing))
             for r in range(WORLD)]  # fmt: skip
    for proc in procs:
        proc.start()
    try:
        for proc in procs:
            proc.join(timeout=timeout)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join()
    assert [proc.exitcode for proc in procs] == [0] * WORLD
    return [torch.load(o) for o in outs]


@needs_gloo
@pytest.mark.parametrize("mode", ["replicated", "sharded"])
def test_distributed_matches_single_process(mode, tmp_path):
    expected, calls = single_process()
    results = run_ranks(mode, tmp_path)
    for r, (params, _, _) in enumerate(results):
        for p, e in zip(params, expected, strict=True):
            want = e.chunk(WORLD)[r] if (mode == "sharded" and e.ndim >= 2) else e
            torch.testing.assert_close(p, want, atol=1e-5, rtol=1e-5)
    # the matrix work is split: each rank orthogonalised only its own share, none twice
    assert sum(c for _, c, _ in results) == calls
    assert all(c < calls for _, c, _ in results)


@needs_gloo
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sharded", "replicated"])
def test_ranks_compute_at_the_same_time(mode, tmp_path):
    # 0.1 issue: sharded mode's blocking gather/scatter per matrix made the ranks take turns (overlap
    # 0.000 s). Now every rank's compute interval of a step overlaps the other's.
    results = run_ranks(mode, tmp_path, timing=True, timeout=300)
    a, b = (intervals for _, _, intervals in results)
    overlap = [max(0.0, min(x[1], y[1]) - max(x[0], y[0])) for x, y in zip(a, b, strict=True)]
    length = [min(x[1] - x[0], y[1] - y[0]) for x, y in zip(a, b, strict=True)]
    assert sum(overlap) > 0.25 * sum(length), (overlap, length)


def test_needs_an_initialised_group():
    if dist.is_initialized():
        pytest.skip("a process group is already initialised")
    with pytest.raises(RuntimeError, match="init_process_group"):
        DistributedPrismMuon([torch.nn.Parameter(torch.zeros(2, 2))])
