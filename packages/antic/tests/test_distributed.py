"""Data-parallel training with gloo and two processes equals a one-process run."""

import multiprocessing
import sys

import pytest
import torch
import torch.distributed as dist
from antic_compress import SnapshotStore, UniformSelector, grid_coords
from antic_helpers import N, antic, frames

WORLD = 2


def worker(rank, store_file, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store_file}", rank=rank, world_size=WORLD)
    try:
        run = antic(f"{out}/rank{rank}", selector=UniformSelector(1.0), distributed=True)
        run.run(frames(4))
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(
    not dist.is_available() or sys.platform == "win32", reason="needs torch.distributed"
)
def test_two_gloo_processes_match_one(tmp_path):
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=worker, args=(r, tmp_path / "pg", tmp_path)) for r in range(WORLD)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    single = antic(tmp_path / "single", selector=UniformSelector(1.0))
    single.run(frames(4))
    coords = grid_coords(N)
    ours, ref = SnapshotStore(tmp_path / "rank0"), SnapshotStore(tmp_path / "single")
    other = SnapshotStore(tmp_path / "rank1")
    assert len(ours) == len(ref) == 4
    for k in range(4):
        a, b = ours.decompress(k, coords), ref.decompress(k, coords)
        assert (a - b).abs().max() <= 1e-4 * b.abs().max()
        assert torch.equal(a, other.decompress(k, coords))  # the ranks agree exactly
