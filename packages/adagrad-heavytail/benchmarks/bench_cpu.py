"""CPU benchmark, every ratio measured in one run (``shared_core.bench.compare``, interleaved).

    python packages/adagrad-heavytail/benchmarks/bench_cpu.py [--params 10000000] [--repeats 15]

1. ``AdaGrad(foreach=True)`` step / ``torch.optim.Adagrad(foreach=True)`` step on 10M float32
   parameters (ten 1M tensors), same lr/eps, same gradients: target ≤ 1.2×.
2. ``AdaGradNorm(scope="global")`` step / the same torch Adagrad step: target ≤ 1.3×.
3. our Chambers–Mallows–Stuck sampler / ``scipy.stats.levy_stable.rvs`` for 10⁶ draws at α = 1.5.
4. the harness's throughput: steps × seeds per second of ``run_horizon`` (d = 10, 64 seeds).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from adagrad_heavytail import experiments as E
from adagrad_heavytail import noise as N
from adagrad_heavytail import problems as P
from adagrad_heavytail.optim import AdaGrad, AdaGradNorm

from shared_core.bench import compare


def _params(total: int) -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(0)
    per = total // 10
    params = [torch.nn.Parameter(torch.randn(per, generator=g)) for _ in range(10)]
    for p in params:
        p.grad = torch.randn(per, generator=g) * 1e-3
    return params


def optimizer_ratios(total: int, repeats: int) -> list[dict]:
    ours, ref, norm = _params(total), _params(total), _params(total)
    a = AdaGrad(ours, lr=1e-3, foreach=True)
    b = torch.optim.Adagrad(ref, lr=1e-3, foreach=True)
    c = AdaGradNorm(norm, lr=1e-3, scope="global")
    rows = [
        compare(
            a.step,
            b.step,
            name="AdaGrad(foreach)",
            baseline_name="torch.optim.Adagrad(foreach)",
            repeats=repeats,
        ),
        compare(
            c.step,
            b.step,
            name="AdaGradNorm(global)",
            baseline_name="torch.optim.Adagrad(foreach)",
            repeats=repeats,
        ),
    ]
    return [r.as_row() | {"params": total} for r in rows]


def sampler_ratio(n: int, repeats: int) -> dict:
    from scipy.stats import levy_stable

    law = N.SymmetricStable(1.5)
    rng = np.random.default_rng(0)
    ours = lambda: law.sample(n, rng)  # noqa: E731
    theirs = lambda: levy_stable.rvs(1.5, 0.0, size=n, random_state=rng)  # noqa: E731
    return compare(
        ours,
        theirs,
        name="SymmetricStable.sample",
        baseline_name="scipy levy_stable.rvs",
        repeats=repeats,
    ).as_row() | {"draws": n}


def harness_throughput(T: int = 2048, seeds: int = 64) -> dict:
    oracle = P.NoisyOracle(P.BoundedNonconvex(10), N.StudentT(1.5))
    rng = np.random.default_rng(0)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        E.run_horizon("adagrad", oracle, T, seeds, {"lr": 0.5, "eps": 0.0}, rng)
        times.append(time.perf_counter() - start)
    best = min(times)
    return {
        "T": T,
        "seeds": seeds,
        "d": 10,
        "seconds": best,
        "steps_x_seeds_per_s": T * seeds / best,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--out", default=None, help="write the rows as JSON here")
    args = parser.parse_args()
    torch.manual_seed(0)
    rows = optimizer_ratios(args.params, args.repeats)
    rows.append(sampler_ratio(1_000_000, max(5, args.repeats // 3)))
    rows.append(harness_throughput())
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    for row in rows:
        print(json.dumps(row))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
