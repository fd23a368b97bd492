"""The official budget on SRBench's real-world sets from a local PMLB cache (not run here: no data).

    python packages/csr/benchmarks/csr_srbench.py --cache DIR [--sets a,b,...] [--seeds 10]
        [--backend loky|dask|ray] [--n-jobs -1] [--out srbench.json]

pmlb ships no data: fill ``DIR`` once where the network allows, e.g.
``pmlb.fetch_data(name, local_cache_dir=DIR)`` for each name in ``pmlb.regression_dataset_names``
(SRBench's black-box sets). Each (set, seed) is one task: a 75/25 split, CSR at the official
configuration (n_pop=200, n_gen=50, ensemble 30) and the external baselines; the tasks run on any
joblib backend (``--backend dask`` or ``ray`` with their clusters set up as their docs say).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def task(cache: str, name: str, seed: int) -> dict:
    import pandas as pd
    from contrastive_sr import ContrastiveSymbolicRegressor
    from sklearn.ensemble import GradientBoostingRegressor, RandomForestRegressor
    from sklearn.model_selection import train_test_split

    path = Path(cache) / name / f"{name}.tsv.gz"
    frame = pd.read_csv(path, sep="\t", compression="gzip")
    X, y = frame.drop(columns="target").to_numpy(float), frame["target"].to_numpy(float)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=seed)
    models = {
        "csr": ContrastiveSymbolicRegressor(random_state=seed),
        "random-forest": RandomForestRegressor(random_state=seed),
        "gradient-boosting": GradientBoostingRegressor(random_state=seed),
    }
    out = {"set": name, "seed": seed}
    for label, model in models.items():
        model.fit(X_tr, y_tr)
        pred = model.predict(X_te)
        out[label] = float(1 - np.sum((y_te - pred) ** 2) / np.sum((y_te - y_te.mean()) ** 2))
    return out


def main() -> None:
    from joblib import Parallel, delayed, parallel_config

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", required=True, help="local PMLB cache folder")
    parser.add_argument("--sets", default="", help="comma-separated names (default: all cached)")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--backend", default="loky")
    parser.add_argument("--n-jobs", type=int, default=-1)
    parser.add_argument("--out", default="srbench.json")
    args = parser.parse_args()
    names = [s for s in args.sets.split(",") if s] or sorted(
        p.name for p in Path(args.cache).iterdir() if (p / f"{p.name}.tsv.gz").exists()
    )
    if not names:
        raise SystemExit(f"no PMLB sets under {args.cache}: fill the cache first (see --help)")
    with parallel_config(backend=args.backend, n_jobs=args.n_jobs):
        rows = Parallel()(delayed(task)(args.cache, n, s) for n in names for s in range(args.seeds))
    Path(args.out).write_text(json.dumps(rows, indent=1))
    for label in ("csr", "random-forest", "gradient-boosting"):
        print(label, "median test R²", float(np.median([r[label] for r in rows])))


if __name__ == "__main__":
    main()
