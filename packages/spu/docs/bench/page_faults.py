"""Minor page faults per SPU training step at L = 4096 and 8192 (the issue's shape, fewer layers).

    python packages/spu/docs/bench/page_faults.py [LAYERS]          # default 1 layer
    MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=68719476736 python packages/spu/docs/bench/page_faults.py

Direct evidence for the allocator reading of the 2L/L check (README, "time(2L)/time(L) at the
issue's shape"): a block glibc serves with a fresh ``mmap`` is zero-filled by the kernel page by page
on first touch, one minor fault per 4 KiB page, so the faults a step takes say how much of its memory
was fresh. Batch 8, d = 128, one thread; one warm-up step, then two measured steps per length.
A reviewer's script (session 7), kept as run; run from the repository root.
"""

import resource
import sys
import time

import torch

sys.path.insert(0, "packages/spu/benchmarks")
import throughput as bench

torch.set_num_threads(1)
layers = int(sys.argv[1]) if len(sys.argv) > 1 else 1
for length in (4096, 8192):
    torch.manual_seed(0)
    step = bench.step_fn(bench.build("SPU", length, 128, layers, "auto"), 8, length, "cpu")
    step()
    for _ in range(2):
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start = time.perf_counter()
        step()
        seconds = time.perf_counter() - start
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        print(f"L={length} layers={layers} step {seconds:.2f}s minor faults {faults} "
              f"({faults * 4096 / 2**30:.2f} GiB of 4 KiB pages)", flush=True)  # fmt: skip
