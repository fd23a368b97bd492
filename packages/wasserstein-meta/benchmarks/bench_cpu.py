"""Closed-loop throughput and the cost of the Wasserstein–Bregman law against the published one.

    python packages/wasserstein-meta/benchmarks/bench_cpu.py [--pairs 64] [--compile]

For 64 (model × reference) pairs of the PFAR: sim-steps/s (one integration step of the batch counts
``pairs`` sim-steps), forward only and forward + backward; and, in the same interleaved run
(``shared_core.bench.compare``), the time of a closed loop with ``WassersteinBregman`` (dual and
primal) over the same loop with ``Quadratic`` (the Euclidean law of the base code). Same features,
gains, references, winds, integrator (Heun), step, dtype (float64), one thread.
``--compile`` also times ``torch.compile`` of the forward loop against eager.
"""

from __future__ import annotations

import argparse
import datetime
import time

import torch
import wasserstein_meta as wm
from wasserstein_meta.potentials import Quadratic, WassersteinBregman
from wasserstein_meta.simulate import closed_loop, reference_stages
from wasserstein_meta.training import _pairs, reference_states, refresh_atoms

from shared_core.bench import compare


def setup(potential, pairs: int, T: float, dt: float):
    plant = wm.systems.PFAR()
    n_models = 8
    refs = wm.trajectories.random_splines(pairs // n_models, T=T, knot_scale=0.7, seed=0)
    ens = wm.OracleEnsemble(plant, wm.tasks.BetaWind().sample(n_models, 0))
    feats = wm.MLPFeatures(6, (32, 32), seed=0)
    ctrl = wm.AdaptiveController(plant, feats, potential, wm.PDGains(3, 1.0, 5.0, 5.0)).double()
    with torch.no_grad():
        refresh_atoms(ctrl, ens, reference_states(refs, T))
    stages = reference_stages(refs, T, dt, "heun", torch.float64)
    ref_index, model_index = _pairs(len(refs), n_models)

    def forward():
        with torch.no_grad():
            return closed_loop(
                ctrl, ens, refs, ref_index, model_index, T, dt, "heun", stages=stages
            )

    def forward_backward():
        if getattr(ctrl.potential, "atoms_source", None) == "ensemble":
            refresh_atoms(ctrl, ens, reference_states(refs, T))
        cost = closed_loop(ctrl, ens, refs, ref_index, model_index, T, dt, "heun", stages=stages)
        cost[:, 0].sum().backward()
        ctrl.zero_grad()

    return forward, forward_backward


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=64)
    parser.add_argument("--T", type=float, default=1.0)
    parser.add_argument("--dt", type=float, default=0.05)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--compile", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    steps = round(args.T / args.dt)
    print(
        f"{datetime.date.today()} torch {torch.__version__}, {args.pairs} pairs, {steps} Heun steps"
    )
    laws = {
        "Quadratic": Quadratic(),
        "WB-dual": WassersteinBregman("ensemble", mode="dual"),
        "WB-primal": WassersteinBregman("ensemble", mode="primal"),
    }
    fns = {name: setup(pot, args.pairs, args.T, args.dt) for name, pot in laws.items()}
    for name, (fwd, fb) in fns.items():
        fwd()
        t0 = time.perf_counter()
        fwd()
        t_f = time.perf_counter() - t0
        t0 = time.perf_counter()
        fb()
        t_b = time.perf_counter() - t0
        print(
            f"{name:10s} forward {args.pairs * steps / t_f:9.0f} sim-steps/s, "
            f"forward+backward {args.pairs * steps / t_b:9.0f} sim-steps/s"
        )
    for name in ("WB-dual", "WB-primal"):
        for kind, idx in (("forward", 0), ("forward+backward", 1)):
            c = compare(
                fns[name][idx],
                fns["Quadratic"][idx],
                name=f"{name} {kind}",
                baseline_name=f"Quadratic {kind}",
                repeats=args.repeats,
                warmup=1,
            )
            target = 2.0 if name == "WB-dual" else 3.0
            print(f"{c}  target <= {target}x: {'met' if c.ratio <= target else 'MISSED'}")
    if args.compile:
        fwd = fns["Quadratic"][0]
        compiled = torch.compile(fwd)
        t0 = time.perf_counter()
        compiled()
        print(f"torch.compile first call (compile time) {time.perf_counter() - t0:.1f} s")
        print(
            compare(
                compiled,
                fwd,
                name="compiled forward",
                baseline_name="eager forward",
                repeats=args.repeats,
                warmup=1,
            )
        )


if __name__ == "__main__":
    main()
