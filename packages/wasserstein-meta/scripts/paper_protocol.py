"""The base code's full PFAR protocol (not run on the 2-core CPU box: hours of meta-training).

    python packages/wasserstein-meta/scripts/paper_protocol.py --n-jobs 16 --out protocol.json

10 seeds × M ∈ {2, 5, 10, 20, 30, 40, 50} training trajectories × methods, each an independent job
(joblib; pass ``--backend dask`` or ``ray`` with their joblib plugins on a cluster): data from the
training wind law 6·Beta(5, 9) (T = 30 s, dt = 0.01), the learned ensemble (stage 1, 1000 epochs),
500 meta-steps at dt = 0.01 (RK4) on 10 references of T = 5 s (7 train / 3 validation), then 200 test
references with winds 9·Beta(5, 7), T = 10 s. Methods: PID; MRR (meta-ridge regression features,
grid gains); the base code's "ours" (control-oriented Euclidean features, grid gains); and the
control-oriented laws with meta-learned gains (Euclidean, ℓp, Wasserstein dual and primal).
Compare with the spec's anchor table (mean RMS error over seeds): PID 0.210; MRR 0.286 / 0.118 /
0.050 and ours 0.036 / 0.025 / 0.024 at M = 2 / 10 / 50. ``--tiny`` runs every method at toy sizes
(one seed, M = 2; a smoke test of the script, seconds per job).
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import numpy as np
import torch
import wasserstein_meta as wm
from wasserstein_meta.baselines import meta_ridge_regression, select_gains
from wasserstein_meta.potentials import LpNorm, Quadratic, WassersteinBregman
from wasserstein_meta.protocol import run_jobs
from wasserstein_meta.training import reference_states

METHODS = (
    "PID",
    "MRR (grid gains)",
    "Euclidean (grid gains)",
    "Euclidean",
    "lp",
    "Wasserstein-dual",
    "Wasserstein-primal",
)


@dataclasses.dataclass(frozen=True)
class Sizes:
    seeds: tuple[int, ...] = tuple(range(10))
    Ms: tuple[int, ...] = (2, 5, 10, 20, 30, 40, 50)
    data_T: float = 30.0
    data_dt: float = 0.01
    epochs: int = 1000
    hidden: tuple[int, ...] = (32, 32)
    steps: int = 500
    n_refs: int = 10
    T: float = 5.0
    dt: float = 0.01
    n_test: int = 200
    test_T: float = 10.0


PAPER = Sizes()
TINY = Sizes((0,), (2,), 1.0, 0.1, 2, (4, 4), 1, 3, 0.4, 0.1, 2, 0.4)


def _potential(method: str):
    return {
        "lp": lambda: LpNorm(2.0),
        "Wasserstein-dual": lambda: WassersteinBregman("ensemble", mode="dual"),
        "Wasserstein-primal": lambda: WassersteinBregman("ensemble", mode="primal"),
    }.get(method, Quadratic)()


def job(seed: int, M: int, method: str, sizes: Sizes = PAPER) -> dict:
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    torch.manual_seed(seed)
    plant = wm.systems.PFAR()
    data = wm.data.generate(
        plant, wm.tasks.BetaWind(0, 6, 5, 9), n_traj=M, T=sizes.data_T, dt=sizes.data_dt, seed=seed
    )
    ens = wm.fit_ensemble(plant, data, hidden=sizes.hidden, epochs=sizes.epochs, lr=1e-2, seed=seed)
    refs = wm.trajectories.random_splines(sizes.n_refs, T=sizes.T, knot_scale=0.7, seed=seed)
    if method == "PID":
        ctrl = wm.AdaptiveController(plant, wm.ZeroFeatures(), None).double()
    else:
        features = wm.MLPFeatures(6, sizes.hidden, seed=seed)
        ctrl = wm.AdaptiveController(plant, features, _potential(method)).double()
    states = reference_states(refs, sizes.T)
    if method == "MRR (grid gains)":
        meta_ridge_regression(ctrl.features, ens, states, steps=sizes.steps, lr=1e-2, seed=seed)
    else:
        wm.meta_train(
            ctrl, ens, refs, steps=sizes.steps, lr=1e-2, T=sizes.T, dt=sizes.dt, val_frac=0.3,
            seed=seed,
        )  # fmt: skip
    if method.endswith("(grid gains)"):
        select_gains(ctrl, ens, refs, sizes.T, sizes.dt, "rk4", states=states)
    test_refs = wm.trajectories.random_splines(sizes.n_test, T=sizes.test_T, seed=10_000 + seed)
    winds = wm.tasks.BetaWind(0, 9, 5, 7).sample(sizes.n_test, 20_000 + seed)
    with torch.no_grad():
        traj = wm.simulate(ctrl, plant, test_refs, wind=winds, T=sizes.test_T, dt=sizes.dt)
    return {
        "seed": seed,
        "M": M,
        "method": method,
        "rms_error": float(wm.metrics.rms_tracking_error(traj).mean()),
    }


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--backend", default="loky")
    parser.add_argument("--out", default="protocol.json")
    parser.add_argument("--tiny", action="store_true", help="toy sizes: a smoke test")
    args = parser.parse_args(argv)
    sizes = TINY if args.tiny else PAPER
    jobs = [
        {"seed": s, "M": M, "method": m, "sizes": sizes}
        for s in sizes.seeds
        for M in sizes.Ms
        for m in METHODS
    ]
    results = run_jobs(job, jobs, n_jobs=args.n_jobs, backend=args.backend)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    for M in sizes.Ms:
        row = {
            m: np.mean([r["rms_error"] for r in results if r["M"] == M and r["method"] == m])
            for m in METHODS
        }
        print(M, {k: round(float(v), 4) for k, v in row.items()})
    return results


if __name__ == "__main__":
    main()
