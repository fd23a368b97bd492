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

One seed on one GPU, REDUCED SCOPE (written for an H100, NOT RUN: no GPU was lent to this task):
M ∈ {2, 10}, four methods, 100 meta-steps instead of 500, validation every 10th step instead of
every step; the rest as the paper. Its errors are not the protocol's (fewer meta-steps), only a
check that the path runs on the card and a trend. Eight jobs at once on the card (a meta-step's
kernels are small: one process leaves the GPU mostly idle), one integration step compiled::

    python packages/wasserstein-meta/scripts/paper_protocol.py --device cuda --compile \
        --n-jobs 8 --seeds 0 --Ms 2 10 --steps 100 --val-every 10 \
        --methods PID Euclidean Wasserstein-dual Wasserstein-primal \
        --deadline-s 300 --out gpu_protocol.json

A job starts only before ``--deadline-s`` seconds have passed (the JSON lists the jobs left out),
so the run ends within about the deadline plus one job. Time per job, by arithmetic from this
CPU's benchmark (``benchmarks/bench_cpu.py``, 64 pairs, one compiled step: 96 000 pair-steps/s
forward and 34 000 forward+backward, Heun; RK4 has twice the stages, so ~48 000 / ~17 000), NOT a
measured GPU figure: a meta-step is one training flight forward and backward (T/dt = 500 RK4
steps over the train pairs: 7 references × 70 % of M models, 49 pairs at M = 10, 245 at M = 50)
plus a validation flight forward (3 references × 30 % of M). At 64 training pairs that is
~1.9 s + ~0.2 s a meta-step, ~18 min for the paper's 500, plus the compile at every job (~25 s
forward, ~67 s forward+backward, cold cache), fit_ensemble (1000 epochs of 4 Adam steps: ~4000
steps, not timed) and the 200 test flights (~10 s): ~21 min a job; at M = 50, ~65 min. The
reduced command's largest job (M = 10, 49 pairs, 100 meta-steps, 10 validations) is ~150 s of
flights + ~90 s of compile + fit_ensemble, ~4-5 min at this CPU's per-step rate; a GPU's rate on
such small kernels is bound by launches and is not known here. Check the first jobs' ``wall_s``.
The full protocol (10 seeds × 7 M × 7 methods = 490 jobs, ~21-65 min each at this rate) is a
cluster run, not an 8-minute one. The JSON holds
the card, the date, torch, the sizes, per job the RMS error and the wall time of each stage, and the
mean per (M, method). CPU dry run of the same path: ``--device cpu --tiny`` (``--compile`` too,
slower: the compile).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import platform
import time

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
    val_every: int = 1
    n_refs: int = 10
    T: float = 5.0
    dt: float = 0.01
    n_test: int = 200
    test_T: float = 10.0


PAPER = Sizes()
# Flights of 2 s at dt = 0.05: the references' knots 0.4 s apart (~5 m/s); at 0.4 s they were
# ~25 m/s and every method's RMS error was 43-103 m, too wild to bound.
TINY = Sizes((0,), (2,), 1.0, 0.1, 2, (4, 4), 1, 1, 3, 2.0, 0.05, 2, 2.0)


def _potential(method: str):
    return {
        "lp": lambda: LpNorm(2.0),
        "Wasserstein-dual": lambda: WassersteinBregman("ensemble", mode="dual"),
        "Wasserstein-primal": lambda: WassersteinBregman("ensemble", mode="primal"),
    }.get(method, Quadratic)()


def _sync(device: str) -> float:
    """The wall clock after the device's queued work (CUDA runs asynchronously)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter()


def job(
    seed: int,
    M: int,
    method: str,
    sizes: Sizes = PAPER,
    device: str = "cpu",
    compile: bool = False,
    deadline: float | None = None,
) -> dict:
    """One (seed, M, method) cell on ``device``; ``compile`` compiles the meta-training step. Past
    ``deadline`` (``time.time()``) it does not start: ``{seed, M, method, "skipped": True}``."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if deadline is not None and time.time() > deadline:
        return {"seed": seed, "M": M, "method": method, "skipped": True}
    if compile:
        torch.compiler.reset()  # each job's controller is new: do not pile up its recompiles
    wall: dict[str, float] = {}
    t0 = _sync(device)
    torch.manual_seed(seed)
    plant = wm.systems.PFAR()
    data = wm.data.generate(
        plant, wm.tasks.BetaWind(0, 6, 5, 9), n_traj=M, T=sizes.data_T, dt=sizes.data_dt, seed=seed
    )
    wall["data"], t0 = _sync(device) - t0, _sync(device)
    ens = wm.fit_ensemble(
        plant, data, hidden=sizes.hidden, epochs=sizes.epochs, lr=1e-2, seed=seed, device=device
    )
    wall["fit_ensemble"], t0 = _sync(device) - t0, _sync(device)
    refs = wm.trajectories.random_splines(sizes.n_refs, T=sizes.T, knot_scale=0.7, seed=seed)
    with torch.device(device):  # built where it flies (seeded draws are on the host anyway)
        if method == "PID":
            ctrl = wm.AdaptiveController(plant, wm.ZeroFeatures(), None)
        else:
            features = wm.MLPFeatures(6, sizes.hidden, seed=seed)
            ctrl = wm.AdaptiveController(plant, features, _potential(method))
    ctrl = ctrl.to(device, torch.float64)
    states = reference_states(refs, sizes.T, device=device)
    if method == "MRR (grid gains)":
        meta_ridge_regression(ctrl.features, ens, states, steps=sizes.steps, lr=1e-2, seed=seed)
    else:
        wm.meta_train(
            ctrl, ens, refs, steps=sizes.steps, lr=1e-2, T=sizes.T, dt=sizes.dt, val_frac=0.3,
            val_every=sizes.val_every, seed=seed, compile=compile,
        )  # fmt: skip
    if method.endswith("(grid gains)"):
        select_gains(ctrl, ens, refs, sizes.T, sizes.dt, "rk4", states=states)
    wall["meta_train"], t0 = _sync(device) - t0, _sync(device)
    test_refs = wm.trajectories.random_splines(sizes.n_test, T=sizes.test_T, seed=10_000 + seed)
    winds = wm.tasks.BetaWind(0, 9, 5, 7).sample(sizes.n_test, 20_000 + seed)
    with torch.no_grad():
        traj = wm.simulate(ctrl, plant, test_refs, wind=winds, T=sizes.test_T, dt=sizes.dt)
    rms = float(wm.metrics.rms_tracking_error(traj).mean())
    wall["test"] = _sync(device) - t0
    return {"seed": seed, "M": M, "method": method, "rms_error": rms, "wall_s": wall}


def card(device: str) -> str:
    if torch.device(device).type == "cuda":
        return torch.cuda.get_device_name(torch.device(device))
    return platform.processor() or platform.machine()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--backend", default="loky")
    parser.add_argument("--out", default="protocol.json")
    parser.add_argument("--tiny", action="store_true", help="toy sizes: a smoke test")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: cpu)")
    parser.add_argument("--compile", action="store_true", help="compile the integration step")
    parser.add_argument("--seeds", type=int, nargs="+", help="a subset of the seeds")
    parser.add_argument("--Ms", type=int, nargs="+", help="a subset of the M values")
    parser.add_argument("--methods", nargs="+", choices=METHODS, help="a subset of the methods")
    parser.add_argument("--steps", type=int, help="meta-steps (paper: 500): a reduced scope")
    parser.add_argument("--val-every", type=int, help="validate every k-th meta-step (paper: 1)")
    parser.add_argument(
        "--deadline-s",
        type=float,
        default=None,
        help="start no job past this many seconds",
    )
    return parser


def main(argv: list[str] | None = None) -> dict:
    parser = _parser()
    args = parser.parse_args(argv)
    if torch.device(args.device).type == "cuda" and not torch.cuda.is_available():
        parser.error(
            f"--device {args.device} was asked for, but this torch ({torch.__version__}, CUDA "
            f"build {torch.version.cuda}) sees no CUDA device"
        )
    sizes = TINY if args.tiny else PAPER
    reduced = {"steps": args.steps, "val_every": args.val_every}
    sizes = dataclasses.replace(sizes, **{k: v for k, v in reduced.items() if v is not None})
    seeds, Ms = args.seeds or sizes.seeds, args.Ms or sizes.Ms
    methods = args.methods or METHODS
    deadline = None if args.deadline_s is None else time.time() + args.deadline_s
    jobs = [
        {"seed": s, "M": M, "method": m, "sizes": sizes, "device": args.device,
         "compile": args.compile, "deadline": deadline}
        for s in seeds
        for M in Ms
        for m in methods
    ]  # fmt: skip
    start = time.perf_counter()
    done = run_jobs(job, jobs, n_jobs=args.n_jobs, backend=args.backend)
    results = [r for r in done if not r.get("skipped")]
    skipped = [r for r in done if r.get("skipped")]
    means = {
        str(M): {
            m: float(np.mean(errs))
            for m in methods
            if (errs := [r["rms_error"] for r in results if r["M"] == M and r["method"] == m])
        }
        for M in Ms
    }
    figures = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "card": card(args.device),
        "device": args.device,
        "torch": torch.__version__,
        "compile": args.compile,
        "sizes": dataclasses.asdict(sizes),
        "wall_s": time.perf_counter() - start,
        "jobs": results,
        "skipped": skipped,
        "mean_rms_error": means,
    }
    with open(args.out, "w") as f:
        json.dump(figures, f, indent=1)
    for M, row in means.items():
        print(M, {k: round(v, 4) for k, v in row.items()})
    print(f"{len(results)} jobs in {figures['wall_s']:.0f} s on {figures['card']}; {args.out}")
    return figures


if __name__ == "__main__":
    main()
