"""Adalina against shapiq's KernelSHAP and SHAP-IQ at equal budget: time, peak memory and error ratios.

    python packages/adalina/benchmarks/bench_shapiq.py [--n 1000] [--budget-factor 100] [--repeats 3]

The game (n players) has a closed-form Shapley value, so errors are exact:

    U(S) = v·1_S/√n + 1_Sᵀ W 1_S / n² + sin(3|S|/n),   W = B Bᵀ/r (rank r = 5)

    φ_i = v_i/√n + (W 1)_i / n² + sin(3)/n

(a pairwise term W_ij z_i z_j, i ≠ j, is shared equally; a function of |S| is split evenly).
Peak memory is measured with ``tracemalloc`` (numpy's buffers included) in a separate run from the
timing. shapiq is an optional benchmark dependency (``pip install adalina[bench]``).
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
from adalina import Adalina

from shared_core.bench import compare


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


def peak_mib(fn: Callable[[], Any]) -> float:
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--budget-factor", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    import shapiq  # the peer; optional

    n, budget = args.n, args.budget_factor * args.n
    game, phi = make_game(n)

    def rel(values: np.ndarray) -> float:
        return float(np.linalg.norm(values - phi) / np.linalg.norm(phi))

    def ours() -> np.ndarray:
        return (
            Adalina(n, "shapley", batch_size=1000, random_state=0).approximate(budget, game).values
        )

    peers = {
        "shapiq.KernelSHAP": lambda: shapiq.KernelSHAP(n=n, random_state=0),
        "shapiq.SHAPIQ(SV, order 1)": lambda: shapiq.SHAPIQ(
            n=n, max_order=1, index="SV", random_state=0
        ),
    }

    def run_peer(make: Callable[[], Any]) -> np.ndarray:
        values = make().approximate(budget, game)
        return np.array([values[(i,)] for i in range(n)])

    rows = []
    ours_values = ours()
    ours_mem = peak_mib(ours)
    for name, make in peers.items():
        start = time.perf_counter()
        theirs = run_peer(make)
        print(f"{name}: one run {time.perf_counter() - start:.1f} s", flush=True)
        timing = compare(
            ours,
            lambda make=make: run_peer(make),
            name="adalina",
            baseline_name=name,
            repeats=args.repeats,
            warmup=0,
        )
        theirs_mem = peak_mib(lambda make=make: run_peer(make))
        rows.append(
            {
                "peer": name,
                "n": n,
                "budget": budget,
                "time_ratio": timing.ratio,
                "peak_memory_ratio": ours_mem / theirs_mem,
                "error_ratio": rel(ours_values) / rel(theirs),
                "adalina_error": rel(ours_values),
                "peer_error": rel(theirs),
                "adalina_peak_mib": ours_mem,
                "peer_peak_mib": theirs_mem,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return {"rows": rows}


if __name__ == "__main__":
    main()
