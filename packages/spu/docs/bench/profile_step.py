"""One SPU forward + backward (batch 8, d = 128, 4 layers, one thread) under torch.profiler at L = 4096
and 8192: each op's self CPU time at both lengths, largest at 8192 first.

    PYTHONPATH=packages/spu/src:packages/shared-core/src python packages/spu/docs/bench/profile_step.py \\
        packages/spu/docs/bench/cpu-profile-L4096-8192.json      # from the repository root

Writes the per-op seconds as JSON to the path given and prints the table of
``cpu-profile-L4096-8192.txt``.
"""

import json
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import throughput as bench

torch.set_num_threads(1)
seconds: dict[int, dict[str, float]] = {}
for length in (4096, 8192):
    torch.manual_seed(0)
    step = bench.step_fn(bench.build("SPU", length, 128, 4, "auto"), 8, length, "cpu")
    step()  # warm-up
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    seconds[length] = {e.key: e.self_cpu_time_total / 1e6 for e in prof.key_averages()}
    print(length, "total self s", round(sum(seconds[length].values()), 2), flush=True)
rows = sorted(
    ((k, seconds[4096].get(k, 0.0), v) for k, v in seconds[8192].items()), key=lambda r: -r[2]
)[:20]
print(f"{'op':45s} {'L=4096 s':>9s} {'L=8192 s':>9s} {'ratio':>6s}")
for key, short, long in rows:
    print(f"{key[:45]:45s} {short:9.3f} {long:9.3f} {long / short if short else float('nan'):6.2f}")
Path(sys.argv[1]).write_text(json.dumps({str(k): v for k, v in seconds.items()}, indent=1))
