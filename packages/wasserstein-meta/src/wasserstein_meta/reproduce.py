"""Reproduce the paper's claims at CPU scale: ``python -m wasserstein_meta.reproduce [--quick|--full]``.

PFAR, oracle ensemble (the analytic wind model at M sampled training winds), control-oriented
meta-training of PID (features ≡ 0), the Euclidean law (Richards et al.), ℓp mirror descent (Tang et
al.) and the Wasserstein–Bregman law (dual and primal), each from the same initial features and gains
with the same budget; then a test on fresh references with winds from the training law and from the
shifted test law. Claims: adaptive < PID; meta-learned ≤ non-meta (same law, untrained features);
Wasserstein ≤ Euclidean under shift (the paper's), also on a bimodal wind law with small M.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from shared_core.cli import ReproduceArgs, progress, reproduce_main
from shared_core.report import Report

PAPER = "Wasserstein Geometry-Aware Adaptive Control via Meta-Learning (ICML 2026, reconstructed)"


@dataclasses.dataclass(frozen=True)
class Budget:
    steps: int
    T: float
    dt: float
    n_refs: int
    n_test: int
    test_T: float
    test_dt: float
    hidden: tuple[int, int]
    M: int
    lr: float


def _budget(args: ReproduceArgs) -> Budget:
    return args.pick(
        smoke=Budget(1, 0.3, 0.1, 2, 3, 0.3, 0.1, (4, 4), 3, 1e-2),
        quick=Budget(12, 3.0, 0.1, 4, 16, 5.0, 0.05, (16, 16), 5, 3e-2),
        full=Budget(150, 5.0, 0.05, 4, 40, 10.0, 0.01, (32, 32), 5, 1e-2),
    )


def _methods(which: Sequence[str]):
    import wasserstein_meta as wm
    from wasserstein_meta.potentials import LpNorm, Quadratic, WassersteinBregman

    makers = {
        "PID": lambda: None,
        "Euclidean": lambda: Quadratic(),
        "lp": lambda: LpNorm(2.0),
        "Wasserstein-dual": lambda: WassersteinBregman("ensemble", lam=1.0, Q=1.0, mode="dual"),
        "Wasserstein-primal": lambda: WassersteinBregman("ensemble", lam=1.0, Q=1.0, mode="primal"),
    }
    del wm
    return {name: makers[name] for name in which}


def _controller(name: str, pot_maker, budget: Budget, seed: int):
    import wasserstein_meta as wm

    gains = wm.PDGains(3, Lambda=1.0, K=5.0, Gamma=5.0)
    if name == "PID":
        return wm.AdaptiveController(wm.systems.PFAR(), wm.ZeroFeatures(), None, gains).double()
    feats = wm.MLPFeatures(6, budget.hidden, seed=seed)
    return wm.AdaptiveController(wm.systems.PFAR(), feats, pot_maker(), gains).double()


def _evaluate(ctrl, refs, winds, budget: Budget) -> dict[str, Any]:
    import wasserstein_meta as wm

    with torch.no_grad():
        try:
            traj = wm.simulate(
                ctrl, ctrl.plant, refs, wind=winds, T=budget.test_T, dt=budget.test_dt
            )
        except wm.SimulationDiverged as err:
            nan = [math.nan] * len(refs)
            return {
                "rms_error": nan,
                "rms_control": nan,
                "rms_estimation": nan,
                "diverged": str(err),
            }
        return {
            "rms_error": wm.metrics.rms_tracking_error(traj).tolist(),
            "rms_control": wm.metrics.rms_control(traj).tolist(),
            "rms_estimation": wm.metrics.rms_estimation_error(traj).tolist(),
        }


def _geometry(ctrl) -> dict[str, float]:
    pot = ctrl.potential
    if not hasattr(pot, "log_eps"):
        return {}
    with torch.no_grad():
        H = pot.hessian(pot.centre_point())[0]
        eig = torch.linalg.eigvalsh(H)
    return {
        "eps": float(pot.eps.detach()),
        "lam": float(pot.lam.detach()),
        "hess_eig_ratio": float(eig[-1] / eig[0]),
    }


def _train_and_test(name, budget: Budget, train_law, test_laws, seed: int, meta: bool = True):
    """Meta-train one method (or leave it untrained: ``meta=False``) and test it."""
    import wasserstein_meta as wm
    from wasserstein_meta.training import meta_train, reference_states, refresh_atoms

    torch.manual_seed(seed)
    plant = wm.systems.PFAR()
    ens = wm.OracleEnsemble(plant, train_law.sample(budget.M, seed))
    refs = wm.trajectories.random_splines(budget.n_refs, T=budget.T, knot_scale=0.7, seed=seed)
    ctrl = _controller(name, _methods([name])[name], budget, seed)
    history = None
    if meta:
        history = meta_train(
            ctrl,
            ens,
            refs,
            steps=budget.steps,
            lr=budget.lr,
            T=budget.T,
            dt=budget.dt,
            integrator="heun",
            val_every=3,
            seed=seed,
            progress=progress,
        )
    else:
        with torch.no_grad():
            refresh_atoms(ctrl, ens, reference_states(refs, budget.T))
    test_refs = wm.trajectories.random_splines(budget.n_test, T=budget.test_T, seed=10_000 + seed)
    out = {"history": dataclasses.asdict(history) if history else None, "geometry": _geometry(ctrl)}
    for label, law in test_laws.items():
        winds = law.sample(budget.n_test, 20_000 + seed).tolist()
        out[label] = _evaluate(ctrl, test_refs, winds, budget) | {"winds": winds}
    return out


def _paired(ours: list[float], base: list[float]) -> tuple[float, float, int]:
    d = np.asarray(ours) - np.asarray(base)
    d = d[np.isfinite(d)]
    if len(d) < 2:
        return math.nan, math.nan, len(d)
    return float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d))), len(d)


def _mean(x: list[float]) -> float:
    return float(np.mean(x)) if np.all(np.isfinite(x)) else math.nan


def _claim(report: Report, name, ours, base, ours_name, base_name, budget, strict: bool, note=""):
    diff, se, n = _paired(ours, base)
    # "<" claims need the paired difference below zero by 2 s.e.; "≤" claims the point estimate.
    held = None if math.isnan(diff) else (diff + 2 * se < 0 if strict else diff <= 0)
    report.claim(
        name,
        "RMS tracking error ‖(e, ė)‖",
        _mean(ours),
        _mean(base),
        direction="lower",
        baseline_name=base_name,
        held=held,
        samples=n,
        note=f"{ours_name} − {base_name}: {diff:+.4f} ± {2 * se:.4f} (2 s.e., {n} paired test flights, "
        f"one training seed). {note}".strip(),
        settings=dataclasses.asdict(budget),
    )


def run(args: ReproduceArgs) -> Report:
    from shared_core.report import subplots
    from wasserstein_meta.tasks import BetaWind, MixtureWind

    budget = _budget(args)
    report = Report("wasserstein-meta", PAPER, args.out, {"size": args.size, "seed": args.seed})
    train_law = BetaWind(0.0, 6.0, 5.0, 9.0)
    test_laws = {"no_shift": train_law, "shift": BetaWind(0.0, 9.0, 5.0, 7.0)}
    names = ["PID", "Euclidean", "lp", "Wasserstein-dual", "Wasserstein-primal"]
    results = {}
    for name in progress(names, desc="methods"):
        results[name] = report.cached(
            f"paper-{name}",
            lambda name=name: _train_and_test(name, budget, train_law, test_laws, args.seed),
        )
    results["Euclidean (untrained)"] = report.cached(
        "paper-untrained",
        lambda: _train_and_test("Euclidean", budget, train_law, test_laws, args.seed, meta=False),
    )
    # The setting where the transport geometry should matter: two wind regimes, few tasks, and a
    # test law between and beyond them.
    bimodal = MixtureWind((BetaWind(0.0, 3.0, 5.0, 5.0), BetaWind(6.0, 9.0, 5.0, 5.0)), (0.5, 0.5))
    bi_tests = {"bimodal": bimodal, "shift": BetaWind(0.0, 11.0, 5.0, 5.0)}
    bi_budget = dataclasses.replace(budget, M=min(budget.M, 4))
    bi = {
        name: report.cached(
            f"bimodal-{name}",
            lambda name=name: _train_and_test(name, bi_budget, bimodal, bi_tests, args.seed),
        )
        for name in progress(["Euclidean", "Wasserstein-dual"], desc="bimodal")
    }

    rows = []
    for name, res in results.items():
        row = {"method": name}
        for label in test_laws:
            row[f"rms_error_{label}"] = _mean(res[label]["rms_error"])
            row[f"rms_control_{label}"] = _mean(res[label]["rms_control"])
            row[f"rms_estimation_{label}"] = _mean(res[label]["rms_estimation"])
        row.update(res["geometry"])
        rows.append(row)
    report.table("PFAR test (mean over test flights)", rows)
    report.table(
        f"Bimodal wind law, M = {bi_budget.M}",
        [
            {
                "method": n,
                **{f"rms_error_{k}": _mean(r[k]["rms_error"]) for k in bi_tests},
                **r["geometry"],
            }
            for n, r in bi.items()
        ],
    )

    err = {n: r["shift"]["rms_error"] for n, r in results.items()}
    _claim(
        report,
        "adaptive < PID (shift)",
        err["Euclidean"],
        err["PID"],
        "Euclidean",
        "PID",
        budget,
        strict=True,
        note="Spec anchor: PID 0.21 vs 0.02–0.09 (base code, full budget).",
    )
    _claim(
        report,
        "meta-learned ≤ non-meta (shift)",
        err["Euclidean"],
        err["Euclidean (untrained)"],
        "meta-trained",
        "untrained features",
        budget,
        strict=False,
        note="Negative control: same law and gains at their initial values, features not trained.",
    )
    best_wb = min(("Wasserstein-dual", "Wasserstein-primal"), key=lambda n: _mean(err[n]))
    _claim(
        report,
        "Wasserstein ≤ Euclidean (shift)",
        err["Wasserstein-dual"],
        err["Euclidean"],
        "Wasserstein-dual",
        "Euclidean",
        budget,
        strict=False,
        note=f"Default mode dual; the better Wasserstein mode on this run was {best_wb}.",
    )
    _claim(
        report,
        "Wasserstein ≤ Euclidean (bimodal, shift)",
        bi["Wasserstein-dual"]["shift"]["rms_error"],
        bi["Euclidean"]["shift"]["rms_error"],
        "Wasserstein-dual",
        "Euclidean",
        bi_budget,
        strict=False,
        note=f"Two wind regimes with a gap between them, M = {bi_budget.M} training winds.",
    )

    fig, ax = subplots(figsize=(6, 3.5))
    for name, res in results.items():
        if res["history"]:
            val = np.asarray(res["history"]["val_loss"], dtype=float)
            steps = np.flatnonzero(np.isfinite(val))
            ax.plot(steps, val[steps], marker="o", label=name)
    ax.set_xlabel("meta-step")
    ax.set_ylabel("validation loss")
    ax.legend(fontsize=7)
    report.figure(
        "meta_training", fig, "Validation loss during meta-training (PFAR, oracle ensemble)"
    )
    fig, ax = subplots(figsize=(6, 3.5))
    x = np.arange(len(results))
    for k, label in enumerate(test_laws):
        ax.bar(
            x + 0.4 * k, [_mean(r[label]["rms_error"]) for r in results.values()], 0.4, label=label
        )
    ax.set_xticks(x + 0.2, list(results), rotation=20, fontsize=7)
    ax.set_ylabel("RMS tracking error")
    ax.legend()
    report.figure(
        "test_error", fig, "Test RMS tracking error, training wind law vs shifted test law"
    )
    return report


def main(argv: Sequence[str] | None = None) -> int:
    return reproduce_main(run, argv, description=__doc__ or "")


if __name__ == "__main__":
    raise SystemExit(main())
