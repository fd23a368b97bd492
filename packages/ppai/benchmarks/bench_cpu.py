"""Time and peak memory of a PPAI fit against ppi-python on the same non-adaptive problem, as ratios.

    python packages/ppai/benchmarks/bench_cpu.py [--N 1000000] [--T 100000] [--d 20] [--repeats 1]
        [--problems logistic,mean]

One arm, propensities ≡ 1 (PPAI's reduction to PPI++), tuned λ, 95 % intervals: PPAI("logistic")
versus ``ppi_py.ppi_logistic_ci`` and PPAI("mean") versus ``ppi_py.ppi_mean_ci`` on the same arrays.
Time: ``shared_core.bench.compare`` (interleaved, median of per-pair ratios); ppi_py's numba helpers
are compiled on a small problem first so compilation is not timed. Memory: peak traced allocation
(``tracemalloc``; numpy reports its buffers to it) of one call each. Ratios below 1 favour PPAI.
Both run with ``--threads`` BLAS threads (default 1: fair and stable on a shared machine).
"""

from __future__ import annotations

import argparse
import datetime
import json
import tracemalloc
import warnings

import numpy as np
import ppai
from threadpoolctl import threadpool_limits

from shared_core.bench import compare


def make_data(N: int, T: int, d: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    beta = rng.standard_normal(d) / np.sqrt(d)

    def draw(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        X = np.c_[np.ones(n), rng.standard_normal((n, d - 1))]
        p = 1 / (1 + np.exp(-X @ beta))
        Y = (rng.random(n) < p).astype(float)
        f = np.clip(p + 0.1 * rng.standard_normal(n), 0, 1)  # a calibrated-ish model score
        return X, Y, f

    X, Y, f = draw(T)
    X_u, _, f_u = draw(N)
    return {"X": X, "Y": Y, "f": f, "X_u": X_u, "f_u": f_u}


def peak_mib(fn) -> float:
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--N", type=int, default=1_000_000)
    parser.add_argument("--T", type=int, default=100_000)
    parser.add_argument("--d", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads for both libraries")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    parser.add_argument(
        "--problems", default="logistic,mean", help="comma-separated subset of logistic,mean"
    )
    args = parser.parse_args()
    with threadpool_limits(args.threads):
        run(args)


def run(args: argparse.Namespace) -> None:
    import ppi_py

    warnings.filterwarnings("ignore", category=FutureWarning)  # sklearn's, inside ppi_py
    data = make_data(args.N, args.T, args.d)
    X, Y, f, X_u, f_u = (data[k] for k in ("X", "Y", "f", "X_u", "f_u"))
    A, pi = np.zeros(args.T, dtype=np.int64), np.ones(args.T)

    wanted = args.problems.split(",")
    small = make_data(2000, 500, args.d, seed=1)  # compile ppi_py's numba helpers untimed
    if "logistic" in wanted:
        ppi_py.ppi_logistic_ci(
            small["X"], small["Y"], small["f"], small["X_u"], small["f_u"], alpha=0.05
        )
    ppi_py.ppi_mean_ci(small["Y"], small["f"], small["f_u"], alpha=0.05)

    cases = {
        "logistic": (
            lambda: ppai.PPAI("logistic", target_arm=0).fit(X, A, Y, pi, f, X_u, f_u).conf_int(),
            lambda: ppi_py.ppi_logistic_ci(X, Y, f, X_u, f_u, alpha=0.05),
        ),
        "mean": (
            lambda: ppai.PPAI("mean", target_arm=0).fit(None, A, Y, pi, f, None, f_u).conf_int(),
            lambda: ppi_py.ppi_mean_ci(Y, f, f_u, alpha=0.05),
        ),
    }
    results = []
    for name, (ours, theirs) in cases.items():
        if name not in wanted:
            continue
        c = compare(
            ours,
            theirs,
            name=f"PPAI {name}",
            baseline_name=f"ppi_py {name}",
            repeats=args.repeats,
            warmup=0,
        )
        mem_ours, mem_theirs = peak_mib(ours), peak_mib(theirs)
        row = {
            "problem": name,
            "threads": args.threads,
            "N": args.N,
            "T": args.T,
            "d": args.d if name == "logistic" else 1,
            "time_ratio": c.ratio,
            "ours_s": c.candidate_s,
            "ppi_py_s": c.baseline_s,
            "memory_ratio": mem_ours / mem_theirs,
            "ours_peak_mib": mem_ours,
            "ppi_py_peak_mib": mem_theirs,
        }
        print(json.dumps(row), flush=True)
        results.append(row)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"date": datetime.date.today().isoformat(), "results": results}, fh, indent=2)


if __name__ == "__main__":
    main()
