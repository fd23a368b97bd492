"""CPU benchmark of antic-compress, in one run:

    python packages/antic/benchmarks/bench_cpu.py [--repeats 5] [--quick] [--out bench.json]

(a) solver steps/s of the torch pseudo-spectral vorticity solver at 128^2 and 256^2;
(b) neural-field training throughput (points/s) with 1 and 2 torch threads, as a ratio;
(c) ANTIC against SZ3 (pysz) and ZFP (zfpy) on the same 256^2 vorticity field (keyframe fitted
    for 100 epochs, 30 with --quick; deltas 10 epochs, the official value): compression time
    per snapshot (a LoRA delta snapshot, the streaming loop's common case) and CR at matched
    rel-L2, as ratios. Timings of (b) and (c) are interleaved pairs (shared_core.bench.compare).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import tempfile
import time
from pathlib import Path

import torch
from antic_compress import (
    ANTIC,
    MLPPlus,
    NeuralFieldCompressor,
    UniformSelector,
    grid_coords,
    rel_l2,
)
from antic_compress.baselines import match_rel_l2, sz3_compress, zfp_compress
from antic_compress.data import Vorticity2D
from antic_compress.training import FitConfig, fit

from shared_core.bench import compare


def solver_rate(n: int, steps: int) -> float:
    solver = Vorticity2D(n=n, nu=1e-3)
    state = solver.initial_state(seed=0)
    w = solver.step_hat(state.w_hat, solver.dt)  # warm-up
    start = time.perf_counter()
    for _ in range(steps):
        w = solver.step_hat(w, solver.dt)
    return steps / (time.perf_counter() - start)


def field(n: int) -> torch.Tensor:
    solver = Vorticity2D(n=n, nu=1e-3)
    state = solver.advance(solver.initial_state(seed=0), 1.0)
    return solver.field(state).to(torch.float32)


def thread_ratio(repeats: int) -> dict:
    coords = grid_coords(128)
    target = torch.rand(coords.shape[0], 1)
    model = MLPPlus(hidden=32, layers=3, fourier_dim=64)
    config = FitConfig(epochs=1, batch_size=4096)

    def with_threads(k):
        def go():
            previous = torch.get_num_threads()
            torch.set_num_threads(k)
            fit(model, coords, target, config)
            torch.set_num_threads(previous)

        return go

    cmp = compare(
        with_threads(2),
        with_threads(1),
        name="2 threads",
        baseline_name="1 thread",
        repeats=repeats,
    )
    points = coords.shape[0]
    return {
        **cmp.as_row(),
        "points_per_s_1": points / cmp.baseline_s,
        "points_per_s_2": points / cmp.candidate_s,
    }


def antic_vs_classical(repeats: int, epochs: int) -> dict:
    n = 256
    w = field(n)
    coords = grid_coords(n)
    frames = [(0.1 * (i + 1), w * (1 + 0.01 * i)) for i in range(repeats + 2)]
    with tempfile.TemporaryDirectory() as tmp:
        run = ANTIC(
            UniformSelector(1.0),
            NeuralFieldCompressor(MLPPlus(hidden=32, layers=3, fourier_dim=64)),
            coords,
            tmp,
            initial_epochs=epochs,
            subsequent_epochs=10,
            batch_size=4096,
            lr=5e-3,
            adapter="lora",
            lora_rank=4,
            reset_every_n=0,
        )
        run.step(*reversed(frames[0]))  # the keyframe
        stream = iter(frames[1:])

        def antic_delta():
            t, f = next(stream)
            return run.step(f, t)

        x = w.numpy()
        record = antic_delta()
        target = record.rel_l2
        span = float(abs(x).max())
        sz_bound, sz = match_rel_l2(sz3_compress, x, target, span * 1e-7, 100 * span)
        zfp_bound, zf = match_rel_l2(zfp_compress, x, target, span * 1e-7, 100 * span)
        cmp_sz = compare(
            antic_delta,
            lambda: sz3_compress(x, sz_bound),
            name="ANTIC delta snapshot",
            baseline_name="SZ3",
            repeats=repeats // 2,
            warmup=0,
        )
        cmp_zfp = compare(
            antic_delta,
            lambda: zfp_compress(x, zfp_bound),
            name="ANTIC delta snapshot",
            baseline_name="ZFP",
            repeats=repeats - repeats // 2,
            warmup=0,
        )
        delta_cr = n * n / record.n_params
        key_cr = n * n / run.store.records[0].n_params
        return {
            "rel_l2": target,
            "sz3_rel_l2": rel_l2(torch.from_numpy(sz.recon), w),
            "zfp_rel_l2": rel_l2(torch.from_numpy(zf.recon), w),
            "antic_delta_cr": delta_cr,
            "antic_key_cr": key_cr,
            "sz3_cr": sz.ratio,
            "zfp_cr": zf.ratio,
            "cr_ratio_vs_sz3": delta_cr / sz.ratio,
            "cr_ratio_vs_zfp": delta_cr / zf.ratio,
            "time_vs_sz3": cmp_sz.as_row(),
            "time_vs_zfp": cmp_zfp.as_row(),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--quick", action="store_true", help="fewer solver steps and epochs")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    steps = 5 if args.quick else 20
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "torch": torch.__version__,
        "load_average": Path("/proc/loadavg").read_text().split()[:3]
        if platform.system() == "Linux"
        else None,
        "solver_steps_per_s": {str(n): solver_rate(n, steps) for n in (128, 256)},
        "threads": thread_ratio(args.repeats),
        "antic_vs_classical": antic_vs_classical(args.repeats, 30 if args.quick else 100),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
