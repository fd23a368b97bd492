"""Peak memory and time of ``TreeGame`` on one fully grown tree (issue 30's target: < 100 MiB).

    python packages/adalina/benchmarks/bench_tree_memory.py [--rows 12500] [--coalitions 16384]

A ``DecisionTreeRegressor`` grown to purity on ``rows`` noisy points (about ``2 * rows`` nodes) is
explained at one point for ``coalitions`` random coalitions in one call; ``tracemalloc`` (which
sees numpy's buffers) reports the peak of the call. The 0.1 code allocated ``nodes x 4096``
floats: 790 MiB at 25k nodes.
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc
from typing import Any

import numpy as np


def measure(rows: int = 12_500, coalitions: int = 16_384, seed: int = 0) -> dict[str, Any]:
    from adalina import TreeGame
    from sklearn.tree import DecisionTreeRegressor

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, 12))
    y = X[:, 0] + np.sin(3 * X[:, 1]) + rng.normal(size=rows)
    model = DecisionTreeRegressor(random_state=seed).fit(X, y)
    game = TreeGame(model, X[0])
    masks = rng.random((coalitions, X.shape[1])) < 0.5
    tracemalloc.start()
    start = time.perf_counter()
    game(masks)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return {
        "nodes": int(model.tree_.node_count),
        "depth": int(model.get_depth()),
        "coalitions": coalitions,
        "peak_mib": peak,
        "seconds": seconds,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=12_500)
    parser.add_argument("--coalitions", type=int, default=16_384)
    args = parser.parse_args(argv)
    result = measure(args.rows, args.coalitions)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
