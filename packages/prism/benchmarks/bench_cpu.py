"""CPU float32 timing of PRISM5 against NS5, Polar Express and the SVD polar factor, as ratios.

    python packages/prism/benchmarks/bench_cpu.py [--repeats 5] [--threads 1] [--quick]

For each shape: time to reach RMS residual 1e-3 (``tol``) and time for 5 fixed steps, as
PRISM5 / NS5, PRISM5 / PolarExpress and PRISM5 / SVD; and the fitting overhead
(5 fitted steps) / (5 steps with fixed α), target ≤ 1.10 at n ≥ 256 with sketch size 8.
Ratios below 1 mean PRISM5 is faster. Each pair is timed interleaved in the same run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform

import prism_matfn as pm
import torch
from prism_matfn.spectra import spectrum_matrix

from shared_core.bench import compare

TOL = 1e-3
MAX_STEPS = 60


def bench_shape(m: int, n: int, repeats: int) -> list[dict]:
    G = spectrum_matrix("gaussian", m, n, seed=0, dtype=torch.float32)

    def prism(steps, tol=None, fit="sketch"):
        return pm.polar(G, steps=steps, tol=tol, fit=fit, check_finite=False)

    def ns5(steps, tol=None):
        return pm.baselines.newton_schulz(G, steps, "quintic", tol=tol, check_finite=False)

    def pe(steps, tol=None):
        return pm.baselines.polar_express(G, steps, tol=tol, check_finite=False)

    infos = {
        "PRISM5": pm.polar(G, steps=MAX_STEPS, tol=TOL, return_info=True),
        "NS5": pm.baselines.newton_schulz(G, MAX_STEPS, "quintic", tol=TOL, return_info=True),
        "PolarExpress": pm.baselines.polar_express(G, MAX_STEPS, tol=TOL, return_info=True),
    }
    iterations = {f"{name} iters": out[1].iterations for name, out in infos.items()}
    print(f"{m}x{n}: iterations to RMS residual {TOL:g}: {iterations}", flush=True)
    comparisons = [
        compare(lambda: prism(MAX_STEPS, TOL), lambda: ns5(MAX_STEPS, TOL),
                name="PRISM5 to tol", baseline_name="NS5 to tol", repeats=repeats),
        compare(lambda: prism(MAX_STEPS, TOL), lambda: pe(MAX_STEPS, TOL),
                name="PRISM5 to tol", baseline_name="PolarExpress to tol", repeats=repeats),
        compare(lambda: prism(MAX_STEPS, TOL), lambda: pm.baselines.svd_polar(G),
                name="PRISM5 to tol", baseline_name="SVD polar", repeats=repeats),
        compare(lambda: prism(5), lambda: ns5(5), name="PRISM5 5 steps",
                baseline_name="NS5 5 steps", repeats=repeats),
        compare(lambda: prism(5), lambda: pe(5), name="PRISM5 5 steps",
                baseline_name="PolarExpress 5 steps", repeats=repeats),
        compare(lambda: prism(5), lambda: prism(5, fit="fixed"), name="PRISM5 fitted",
                baseline_name="PRISM5 fixed α", repeats=repeats),
    ]  # fmt: skip
    rows = []
    for c in comparisons:
        print(f"{m}x{n}: {c}", flush=True)
        rows.append({"shape": f"{m}x{n}", **c.as_row(), **iterations})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="only the smallest shape")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    shapes = [(1024, 256)] if args.quick else [(1024, 256), (2048, 512), (1024, 1024)]
    rows = []
    for m, n in shapes:
        rows += bench_shape(m, n, args.repeats)
    meta = {
        "date": datetime.date.today().isoformat(),
        "machine": platform.processor() or platform.machine(),
        "threads": args.threads,
        "torch": torch.__version__,
    }
    print(json.dumps(meta))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
