"""Adalina against shapiq's approximators at shapiq's budget semantics, over seeds.

    python packages/adalina/benchmarks/bench_shapiq.py [--seeds 10] [--out result.json]
    python packages/adalina/benchmarks/bench_shapiq.py --games synthetic500 --seeds 3 \
        --memory-seeds 3 --estimators "adalina (evaluations)" "adalina (draws)" \
        shapiq.KernelSHAP shapiq.PermutationSamplingSV

Two games with exact Shapley values:

* ``tree14``: the reproduction's boosted-tree game on ``load_breast_cancer`` (14 features, all
  ``2^14`` utilities tabulated), budget ``100 n = 1400``: small enough that duplicates matter
  (shapiq charges only distinct coalitions and enumerates the smallest and largest sizes exactly).
* ``synthetic50``: n = 50, ``U(S) = v·1_S/√n + 1_Sᵀ W 1_S/n² + sin(3|S|/n)`` (low-rank W, closed
  form Shapley value), budget ``20 n = 1000``.
* ``synthetic500``: the same game at n = 500, budget ``10 n = 5000``: large enough that the memory
  of an O(n²) regression (KernelSHAP's design and n × n system) shows against Adalina's O(n) sums.

Seeds are the outer loop and the estimators run interleaved inside it, in an order rotated per
seed, so machine-load drift is spread over every estimator instead of landing on one.

Every estimator is charged shapiq's way: ``budget`` distinct evaluated coalitions (adalina's
``budget="evaluations"``; a repeated draw is served from its cache). ``adalina (draws)`` is shown
for reference: the paper's count, each draw paid for. Per seed and estimator: relative L2 error,
the wall time of ``approximate`` (one untraced run) and its peak traced memory (a second run under
``tracemalloc``, which sees numpy's buffers, on the first ``--memory-seeds`` seeds: shapiq's SVARM
takes ~50 s a run at n = 100 here); the table gives mean ± standard error over seeds.
Peers: shapiq's KernelSHAP, UnbiasedKernelSHAP, SHAPIQ (SV, order 1), PermutationSamplingSV,
SVARM and StratifiedSamplingSV.
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np


def synthetic_game(n: int = 100, seed: int = 0, rank: int = 5) -> tuple[Callable, np.ndarray]:
    rng = np.random.default_rng(seed)
    v = rng.normal(size=n)
    B = rng.normal(size=(n, rank))

    def game(masks: np.ndarray) -> np.ndarray:
        z = np.atleast_2d(masks).astype(float)
        size = z.sum(axis=1)
        quad = ((z @ B) ** 2).sum(axis=1) / (rank * n**2)
        return z @ v / np.sqrt(n) + quad + np.sin(3 * size / n)

    # a pairwise term W_ij z_i z_j (i != j) is shared equally; W_ii z_i goes to i; sin(3|S|/n) is
    # split evenly
    W = B @ B.T / rank
    phi = v / np.sqrt(n) + W.sum(axis=1) / n**2 + np.sin(3.0) / n
    return game, phi


def tree_game() -> tuple[Callable, np.ndarray]:
    from adalina import TabularGame, TreeGame, exact_semivalue
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import GradientBoostingClassifier

    X, y = load_breast_cancer(return_X_y=True)
    X = X[:, :14]
    model = GradientBoostingClassifier(n_estimators=10, max_depth=5, random_state=0).fit(X, y)
    table = TabularGame.from_game(TreeGame(model, X[7]), 14)
    return table, exact_semivalue(table, 14)


def _shapiq_values(approximator: Any, budget: int, game: Callable, n: int) -> np.ndarray:
    values = approximator.approximate(budget, game)
    return np.array([values[(i,)] for i in range(n)])


def estimators(n: int) -> dict[str, Callable[[int, int, Callable], np.ndarray]]:
    import shapiq
    from adalina import Adalina

    def ours(budget_rule: str) -> Callable[[int, int, Callable], np.ndarray]:
        return lambda seed, budget, game: (
            Adalina(n, budget=budget_rule, random_state=seed).approximate(budget, game).values
        )

    def peer(make: Callable[[int], Any]) -> Callable[[int, int, Callable], np.ndarray]:
        return lambda seed, budget, game: _shapiq_values(make(seed), budget, game, n)

    return {
        "adalina (evaluations)": ours("evaluations"),
        "adalina (draws)": ours("draws"),
        "shapiq.KernelSHAP": peer(lambda s: shapiq.KernelSHAP(n=n, random_state=s)),
        "shapiq.UnbiasedKernelSHAP": peer(lambda s: shapiq.UnbiasedKernelSHAP(n=n, random_state=s)),
        "shapiq.SHAPIQ (SV)": peer(
            lambda s: shapiq.SHAPIQ(n=n, max_order=1, index="SV", random_state=s)
        ),
        "shapiq.PermutationSamplingSV": peer(
            lambda s: shapiq.PermutationSamplingSV(n=n, random_state=s)
        ),
        "shapiq.SVARM": peer(lambda s: shapiq.SVARM(n=n, random_state=s)),
        "shapiq.StratifiedSamplingSV": peer(
            lambda s: shapiq.StratifiedSamplingSV(n=n, random_state=s)
        ),
    }


def measure(
    run: Callable[[int, int, Callable], np.ndarray],
    seed: int,
    budget: int,
    game: Callable,
    phi: np.ndarray,
    memory: bool,
) -> dict[str, float]:
    start = time.perf_counter()
    values = run(seed, budget, game)
    seconds = time.perf_counter() - start
    error = float(np.linalg.norm(values - phi) / np.linalg.norm(phi))
    out = {"error": error, "seconds": seconds}
    if memory:
        tracemalloc.start()
        run(seed, budget, game)
        out["peak_mib"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return out


def _mean_se(xs: list[float]) -> tuple[float, float]:
    a = np.asarray(xs)
    return float(a.mean()), float(a.std(ddof=1) / np.sqrt(a.size)) if a.size > 1 else 0.0


def main(argv: list[str] | None = None) -> dict[str, Any]:
    import warnings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--memory-seeds", type=int, default=3)
    parser.add_argument("--games", nargs="*", default=["tree14", "synthetic50"])
    parser.add_argument("--estimators", nargs="*", default=None, help="default: all")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    games = {
        "tree14": lambda: (*tree_game(), 1400),
        "synthetic50": lambda: (*synthetic_game(50), 1000),
        "synthetic500": lambda: (*synthetic_game(500), 5000),
    }
    summary: dict[str, Any] = {}
    for label in args.games:
        game, phi, budget = games[label]()
        n = phi.size
        runs = estimators(n)
        if args.estimators:
            runs = {name: runs[name] for name in args.estimators}
        per_seed: dict[str, list[dict[str, float]]] = {name: [] for name in runs}
        names = list(runs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # shapiq's notes on budgets and border tricks
            for seed in range(args.seeds):
                shift = seed % len(names)
                for name in names[shift:] + names[:shift]:  # interleaved, rotated per seed
                    memory = seed < args.memory_seeds
                    per_seed[name].append(measure(runs[name], seed, budget, game, phi, memory))
                    print(
                        json.dumps(
                            {"game": label, "seed": seed, "estimator": name, **per_seed[name][-1]}
                        ),
                        flush=True,
                    )
        rows = {
            name: {
                key: _mean_se([r[key] for r in results if key in r])
                for key in ("error", "seconds", "peak_mib")
            }
            for name, results in per_seed.items()
        }
        summary[label] = {
            "n": n,
            "budget": budget,
            "seeds": args.seeds,
            "memory_seeds": min(args.memory_seeds, args.seeds),
            "rows": rows,
        }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(summary, f, indent=1)
    return summary


if __name__ == "__main__":
    main()
