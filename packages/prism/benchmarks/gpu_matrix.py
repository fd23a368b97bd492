"""GPU matrix-level comparison at the paper's sizes (Sec. 6.1): NOT run in this repository's CI.

    python packages/prism/benchmarks/gpu_matrix.py [--steps 10] [--dtype float32] [--out gpu_matrix.json]

Gaussian 15000×15000, 20000×5000, 100000×2000 and heavy-tailed MP 8000×4000 (κ ∈ {0.1, 0.5, 100}):
RMS residual of I − XᵀX after each of ``steps`` iterations for NS5, Polar Express and PRISM5 (sketch,
exact solver and grid solver), plus the wall time of ``steps`` iterations (CUDA-synchronised) and the
time ratios against NS5. Needs a GPU with ≥ 40 GB for the largest case.
"""

from __future__ import annotations

import argparse
import datetime
import json

import prism_matfn as pm
import torch
from prism_matfn.spectra import spectrum_matrix

from shared_core.bench import time_once

CASES = [
    ("gaussian", 15000, 15000, {}),
    ("gaussian", 20000, 5000, {}),
    ("gaussian", 100000, 2000, {}),
    ("htmp", 8000, 4000, {"kappa": 0.1}),
    ("htmp", 8000, 4000, {"kappa": 0.5}),
    ("htmp", 8000, 4000, {"kappa": 100.0}),
]


def methods(steps: int, dtype: torch.dtype) -> dict:
    return {
        "NS5": lambda G, **kw: pm.baselines.newton_schulz(
            G, steps, "quintic", compute_dtype=dtype, **kw
        ),
        "PolarExpress": lambda G, **kw: pm.baselines.polar_express(
            G, steps, compute_dtype=dtype, **kw
        ),
        "PRISM5": lambda G, **kw: pm.polar(G, steps=steps, compute_dtype=dtype, **kw),
        "PRISM5-grid": lambda G, **kw: pm.polar(
            G, steps=steps, compute_dtype=dtype, alpha_solver="grid", **kw
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="gpu_matrix.json")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gpu_matrix.py needs a CUDA device")
    dtype = getattr(torch, args.dtype)
    rows = []
    for spectrum, m, n, opts in CASES:
        G = spectrum_matrix(spectrum, m, n, seed=0, dtype=torch.float32, **opts).cuda()
        times = {}
        for name, fn in methods(args.steps, dtype).items():
            _, info = fn(G, return_info=True)
            fn(G)  # warm-up
            times[name] = min(time_once(lambda fn=fn, G=G: fn(G)) for _ in range(args.repeats))
            row = {"case": f"{spectrum}{opts or ''} {m}x{n}", "method": name,
                   "seconds": times[name], "rms": info.residual_rms.tolist()}  # fmt: skip
            rows.append(row)
            print(
                row["case"],
                name,
                f"{times[name]:.3f}s",
                [f"{r:.2e}" for r in row["rms"]],
                flush=True,
            )
        for name in times:
            print(f"  {name}/NS5 time ratio: {times[name] / times['NS5']:.3f}")
        del G
        torch.cuda.empty_cache()
    meta = {"date": datetime.date.today().isoformat(), "card": torch.cuda.get_device_name(),
            "torch": torch.__version__, "dtype": args.dtype, "steps": args.steps}  # fmt: skip
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=2)
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
