"""Data-parallel training with gloo and two processes: split batches, one writer, one-process result.

Each rank records the coordinates its training forwards see, so the test fails if a rank trains on
the whole batch (the averaged gradient would then still equal the one-process one), and counts the
files it writes, so it fails unless rank 0 alone writes the shared store (as the README says).
"""

import multiprocessing
import os
import sys

import antic_compress.store as store_module
import pytest
import torch
import torch.distributed as dist
from antic_compress import SnapshotStore, UniformSelector, grid_coords
from antic_helpers import N, antic, frames

WORLD = 2
COUNT = 4


def record_training_inputs(run):
    """Coordinates of every forward with autograd on (the training batches, not ``predict``)."""
    seen = []

    def hook(module, args):
        if torch.is_grad_enabled():
            seen.append(args[0].detach().clone())

    run.compressor.model.register_forward_pre_hook(hook)
    return seen


def worker(rank, store_file, out):
    torch.set_num_threads(1)
    writes = []
    save_file, replace = store_module.save_file, os.replace
    store_module.save_file = lambda t, path: (writes.append(path), save_file(t, path))[1]
    os.replace = lambda a, b: (writes.append(str(b)), replace(a, b))[1]
    dist.init_process_group("gloo", init_method=f"file://{store_file}", rank=rank, world_size=WORLD)
    try:
        run = antic(out / "shared", selector=UniformSelector(1.0), distributed=True)
        seen = record_training_inputs(run)
        run.run(frames(COUNT))
        os.replace = replace
        torch.save(
            {"seen": seen, "writes": writes, "stats": run.stats(), "writer": run.store.writer},
            out / f"rank{rank}.pt",
        )
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(
    not dist.is_available() or sys.platform == "win32", reason="needs torch.distributed"
)
def test_two_gloo_processes_split_batches_and_match_one(tmp_path):
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=worker, args=(r, tmp_path / "pg", tmp_path)) for r in range(WORLD)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    single = antic(tmp_path / "single", selector=UniformSelector(1.0))
    seen_single = record_training_inputs(single)
    single.run(frames(COUNT))
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]

    # Each global batch is split: the ranks' shards are disjoint halves whose union is the
    # one-process batch of the same step.
    assert len(ranks[0]["seen"]) == len(ranks[1]["seen"]) == len(seen_single) > 0
    for a, b, whole in zip(ranks[0]["seen"], ranks[1]["seen"], seen_single, strict=True):
        assert a.shape[0] == b.shape[0] == whole.shape[0] // WORLD
        rows_a, rows_b = {tuple(r) for r in a.tolist()}, {tuple(r) for r in b.tolist()}
        assert not rows_a & rows_b
        assert rows_a | rows_b == {tuple(r) for r in whole.tolist()}

    # Rank 0 alone writes; rank 1 counts the same bytes without writing.
    assert ranks[0]["writer"] and not ranks[1]["writer"]
    assert ranks[1]["writes"] == []
    assert len([w for w in ranks[0]["writes"] if w.endswith(".safetensors")]) == COUNT
    assert ranks[0]["stats"] == ranks[1]["stats"]
    ours, ref = SnapshotStore(tmp_path / "shared"), SnapshotStore(tmp_path / "single")
    # (store.json holds each snapshot's loss as text: a digit more or less is allowed)
    assert ranks[0]["stats"]["bytes_written"] == pytest.approx(
        single.stats()["bytes_written"], abs=COUNT * 4
    )

    coords = grid_coords(N)
    assert len(ours) == len(ref) == COUNT
    for k in range(COUNT):
        a, b = ours.decompress(k, coords), ref.decompress(k, coords)
        assert (a - b).abs().max() <= 1e-4 * b.abs().max()
