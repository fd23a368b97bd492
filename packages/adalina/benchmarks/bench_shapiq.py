"""Adalina against shapiq's KernelSHAP and SHAP-IQ at equal budget: time, peak memory and error ratios.

    python packages/adalina/benchmarks/bench_shapiq.py [--n 1000] [--budget-factor 100]

The game (n players) has a closed-form Shapley value, so errors are exact:

    U(S) = v·1_S/√n + 1_Sᵀ W 1_S / n² + sin(3|S|/n),   W = B Bᵀ/r (rank r = 5)

    φ_i = v_i/√n + (W 1)_i / n² + sin(3)/n

(a pairwise term W_ij z_i z_j, i ≠ j, is shared equally; a function of |S| is split evenly).

Each estimator runs once in a fresh process, which reports the wall time of ``approximate`` and the
growth of the process's peak resident memory during it (``ru_maxrss`` after minus the resident size
before). Adalina runs before and after the peers, and its mean is the numerator of the ratios, so
drift in the machine's load shows. One shapiq run at n = 1000 takes minutes, which is why this
does not use ``shared_core.bench.compare``'s interleaved repeats. shapiq is an optional benchmark
dependency (``pip install adalina[peers]``).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

CANDIDATES = ("adalina", "shapiq.KernelSHAP", "shapiq.SHAPIQ(SV, order 1)")


def make_game(
    n: int, seed: int = 0, rank: int = 5
) -> tuple[Callable[[np.ndarray], np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    v = rng.normal(size=n)
    B = rng.normal(size=(n, rank))

    def game(masks: np.ndarray) -> np.ndarray:
        z = masks.astype(float)
        proj = z @ B
        size = z.sum(axis=1)
        return z @ v / np.sqrt(n) + (proj**2).sum(axis=1) / (rank * n**2) + np.sin(3 * size / n)

    W = B @ B.T / rank
    phi = v / np.sqrt(n) + W.sum(axis=1) / n**2 + np.sin(3.0) / n
    return game, phi


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def worker(name: str, n: int, budget: int) -> dict[str, Any]:
    """One estimator run in this process: seconds, peak memory growth (MiB), relative error."""
    game, phi = make_game(n)
    if name == "adalina":
        from adalina import Adalina

        def run() -> np.ndarray:
            est = Adalina(n, "shapley", batch_size=1000, random_state=0)
            return est.approximate(budget, game).values
    else:
        import shapiq

        make = {
            "shapiq.KernelSHAP": lambda: shapiq.KernelSHAP(n=n, random_state=0),
            "shapiq.SHAPIQ(SV, order 1)": lambda: shapiq.SHAPIQ(
                n=n, max_order=1, index="SV", random_state=0
            ),
        }[name]

        def run() -> np.ndarray:
            values = make().approximate(budget, game)
            return np.array([values[(i,)] for i in range(n)])

    before = _rss_mib()
    start = time.perf_counter()
    values = run()
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    error = float(np.linalg.norm(values - phi) / np.linalg.norm(phi))
    return {"name": name, "seconds": seconds, "peak_growth_mib": peak - before, "error": error}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--budget-factor", type=int, default=100)
    parser.add_argument("--worker", choices=CANDIDATES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    budget = args.budget_factor * args.n
    if args.worker:
        result = worker(args.worker, args.n, budget)
        print(json.dumps(result), flush=True)
        return result

    def spawn(name: str) -> dict[str, Any]:
        cmd = [
            sys.executable,
            __file__,
            "--worker",
            name,
            "--n",
            str(args.n),
            "--budget-factor",
            str(args.budget_factor),
        ]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        result = json.loads(out.strip().splitlines()[-1])
        print(json.dumps(result), flush=True)
        return result

    first = spawn("adalina")
    peers = [spawn(name) for name in CANDIDATES[1:]]
    last = spawn("adalina")
    ours = {k: (first[k] + last[k]) / 2 for k in ("seconds", "peak_growth_mib", "error")}
    rows = [
        {
            "peer": peer["name"],
            "n": args.n,
            "budget": budget,
            "time_ratio": ours["seconds"] / peer["seconds"],
            "peak_memory_ratio": ours["peak_growth_mib"] / max(peer["peak_growth_mib"], 1e-9),
            "error_ratio": ours["error"] / peer["error"],
            "adalina": ours,
            "peer_measured": peer,
        }
        for peer in peers
    ]
    for row in rows:
        print(json.dumps(row), flush=True)
    return {"rows": rows}


if __name__ == "__main__":
    main()
