"""Replicate one cell of the geometry search on fresh seeds (the README's confirmation run).

    python packages/wasserstein-meta/scripts/geometry_replication.py --setting "bimodal, M = 3" \
        --arm Wasserstein-primal --seeds 3 4 5

Trains the Euclidean arm and each ``--arm`` in ``--setting`` with the `--quick` budget of
``python -m wasserstein_meta.reproduce --only geometry`` (same code path, same seeds' meaning), then
prints, for each test law, the per-seed paired gap to Euclidean, its mean ± 2 s.e. across seeds and
the paper's claim rule (non-inferiority at +2 %; a diverged test flight makes it not held).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import time
from pathlib import Path

import numpy as np
import torch
from wasserstein_meta import reproduce as rep

from shared_core.cli import ReproduceArgs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--setting", default="bimodal, M = 3", choices=[s.label for s in rep.GEOMETRY_SETTINGS]
    )
    parser.add_argument(
        "--arm", default=["Wasserstein-primal"], nargs="+", choices=rep.GEOMETRY_ARMS[1:]
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[3, 4, 5])
    args = parser.parse_args(argv)
    if len(set(args.seeds)) != len(args.seeds):
        # A repeated seed is the same training run twice: it would shrink the s.e. with no new data.
        parser.error(f"--seeds must be distinct, got {args.seeds}")
    relation, margin = rep.CLAIM_RULES["Wasserstein ≤ Euclidean"]
    torch.set_num_threads(1)
    setting = {s.label: s for s in rep.GEOMETRY_SETTINGS}[args.setting]
    unimodal, bimodal, tests = rep._geometry_laws()
    train_law = bimodal if setting.bimodal else unimodal
    laws = {"train": train_law, **tests}
    budget = dataclasses.replace(rep._budget(ReproduceArgs(Path("."), "quick", 0)), M=setting.M)
    res: dict[str, list] = {}
    for arm in ("Euclidean", *args.arm):
        for seed in args.seeds:
            start = time.perf_counter()
            res.setdefault(arm, []).append(rep._train_and_test(arm, budget, train_law, laws, seed))
            print(f"trained {arm} seed {seed}: {time.perf_counter() - start:.0f} s", flush=True)
    for arm, label in itertools.product(args.arm, laws):
        ours, base = rep._flights(res[arm], label), rep._flights(res["Euclidean"], label)
        per_seed = [float(np.mean(np.subtract(o, b))) for o, b in zip(ours, base, strict=True)]
        diff, se, _ = rep.paired_by_seed(ours, base)
        base_mean = rep._nanmean(base)
        lost = {
            a: rep.diverged_flights(rep._flights(res[a], label), []) for a in ("Euclidean", arm)
        }
        print(
            f"{label:13s} Euclidean {base_mean:.4f}  {arm} {rep._nanmean(ours):.4f}  "
            f"per seed {np.round(per_seed, 4).tolist()}  gap {diff:+.4f} ± {2 * se:.4f}  "
            f"diverged flights {lost}  held ({relation}, {margin:+.0%}): "
            f"{rep.claim_verdict(diff, se, base_mean, margin, relation, sum(lost.values()))}"
        )


if __name__ == "__main__":
    main()
