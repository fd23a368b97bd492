"""Closed-loop throughput, the cost of the Wasserstein–Bregman law against the published one, and
torch.compile against eager.

    python packages/wasserstein-meta/benchmarks/bench_cpu.py [--pairs 64] [--compile-loop 2.0]

For 64 (model × reference) pairs of the PFAR: sim-steps/s (one integration step of the batch counts
``pairs`` sim-steps), forward only and forward + backward; and, in the same interleaved run
(``shared_core.bench.compare``), the time of a closed loop with ``WassersteinBregman`` (dual and
primal) over the same loop with ``Quadratic`` (the Euclidean law of the base code). Same features,
gains, references, winds, integrator (Heun), step, dtype (float64), one thread.
Then ``closed_loop(compile=True)`` (one Heun step under ``torch.compile``, ``dynamic=False``, reused
at every step, so the compile time does not grow with the loop) against eager for the Quadratic law,
forward and forward + backward, at the ``--T`` loop (default 20 steps) and each ``--compile-loop``:
the compile time (first calls), the largest relative difference of the costs and gradients, and the
interleaved ratios. It runs in a child process capped at ``--compile-cap`` seconds (0 skips it;
``--compile-only`` runs it alone); past the cap the line reads "over the cap" with the time.
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import time

import torch
import wasserstein_meta as wm
from wasserstein_meta.potentials import Quadratic, WassersteinBregman
from wasserstein_meta.simulate import closed_loop, reference_stages
from wasserstein_meta.training import _pairs, reference_states, refresh_atoms

from shared_core.bench import compare


def setup(potential, pairs: int, T: float, dt: float, compile: bool = False, loops=None):
    """Closed loops of ``T`` s (and of each length in ``loops``, on the same controller, so that a
    compiled step is compiled once): ``{T: (forward, forward_backward)}``, or the pair for ``T``
    alone when ``loops`` is None. References are built over the longest loop."""
    plant = wm.systems.PFAR()
    n_models = 8
    lengths = sorted({T, *(loops or ())})
    refs = wm.trajectories.random_splines(pairs // n_models, T=lengths[-1], knot_scale=0.7, seed=0)
    ens = wm.OracleEnsemble(plant, wm.tasks.BetaWind().sample(n_models, 0))
    feats = wm.MLPFeatures(6, (32, 32), seed=0)
    ctrl = wm.AdaptiveController(plant, feats, potential, wm.PDGains(3, 1.0, 5.0, 5.0)).double()
    with torch.no_grad():
        refresh_atoms(ctrl, ens, reference_states(refs, lengths[-1]))
    ref_index, model_index = _pairs(len(refs), n_models)

    def loop(length: float):
        stages = reference_stages(refs, length, dt, "heun", torch.float64)

        def cost():
            return closed_loop(
                ctrl, ens, refs, ref_index, model_index, length, dt, "heun", stages=stages,
                compile=compile,
            )  # fmt: skip

        def forward():
            with torch.no_grad():
                return cost()

        def forward_backward():
            if getattr(ctrl.potential, "atoms_source", None) == "ensemble":
                refresh_atoms(ctrl, ens, reference_states(refs, lengths[-1]))
            c = cost()
            c[:, 0].sum().backward()
            grads = [p.grad.clone() for p in ctrl.parameters() if p.grad is not None]
            ctrl.zero_grad()
            return c.detach(), grads

        return forward, forward_backward

    fns = {length: loop(length) for length in lengths}
    return fns if loops is not None else fns[T]


def _max_rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


def _compiled_vs_eager(pairs: int, T: float, loops: list[float], dt: float, repeats: int) -> None:
    """The child process of ``--compile-cap``: compile one Heun step of the Quadratic closed loop
    (``closed_loop(compile=True)``), check it against eager, time both at each loop length."""
    eager = setup(Quadratic(), pairs, T, dt, loops=loops)
    compiled = setup(Quadratic(), pairs, T, dt, compile=True, loops=loops)
    first = min(eager)
    t0 = time.perf_counter()
    c_cost = compiled[first][0]()
    print(f"compile, forward step (first call): {time.perf_counter() - t0:.1f} s", flush=True)
    t0 = time.perf_counter()
    c_fb = compiled[first][1]()
    print(
        f"compile, forward+backward step (first call): {time.perf_counter() - t0:.1f} s",
        flush=True,
    )
    e_cost, e_fb = eager[first][0](), eager[first][1]()
    grads = max(_max_rel(c, e) for c, e in zip(c_fb[1], e_fb[1], strict=True))
    print(
        f"compiled vs eager, {round(first / dt)} steps: costs max rel. diff "
        f"{_max_rel(c_cost, e_cost):.2g}, gradients max rel. diff {grads:.2g}",
        flush=True,
    )
    for length in sorted(eager):
        steps = round(length / dt)
        for kind, idx in (("forward", 0), ("forward+backward", 1)):
            c = compare(
                compiled[length][idx],
                eager[length][idx],
                name=f"compiled {kind} ({steps} steps)",
                baseline_name=f"eager {kind}",
                repeats=repeats,
                warmup=1,
            )
            rate = pairs * steps
            print(
                f"{c}; {rate / c.candidate_s:.0f} vs {rate / c.baseline_s:.0f} sim-steps/s",
                flush=True,
            )


def _compile_with_cap(args: argparse.Namespace) -> None:
    cmd = [sys.executable, __file__, "--compile-child", "--pairs", str(args.pairs)]
    cmd += ["--T", str(args.T), "--dt", str(args.dt), "--repeats", str(args.repeats)]
    cmd += [arg for length in args.compile_loops for arg in ("--compile-loop", str(length))]
    t0 = time.perf_counter()
    try:
        # One compile thread: inductor's worker pool would outlive a child killed at the cap.
        env = {**os.environ, "TORCHINDUCTOR_COMPILE_THREADS": "1"}
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.compile_cap, env=env)
    except subprocess.TimeoutExpired as exc:
        done = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        print(done.strip() or "torch.compile first call: not finished")
        print(
            f"compiled / eager: over the cap ({args.compile_cap:.0f} s, compile "
            f"included; killed after {time.perf_counter() - t0:.0f} s): not measured"
        )
        return
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
        print(f"compiled / eager: torch.compile failed: {tail}")
        return
    print(out.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=64)
    parser.add_argument("--T", type=float, default=1.0)
    parser.add_argument("--dt", type=float, default=0.05)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--compile-cap", type=float, default=600.0)
    parser.add_argument(
        "--compile-loop",
        dest="compile_loops",
        type=float,
        action="append",
        default=[],
        help="a longer loop (s) to time compiled against eager as well (repeatable)",
    )
    parser.add_argument("--compile-only", action="store_true", help="only the compile comparison")
    parser.add_argument("--compile-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.compile_child:
        _compiled_vs_eager(args.pairs, args.T, args.compile_loops, args.dt, args.repeats)
        return
    if args.compile_only:
        _compile_with_cap(args)
        return
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
    if args.compile_cap > 0:
        _compile_with_cap(args)


if __name__ == "__main__":
    main()
