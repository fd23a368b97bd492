"""Reproduce the paper's claims at CPU scale: ``python -m prism_matfn.reproduce [--quick|--full]``.

1. Polar factor: residual-versus-iteration and iterations to RMS residual 1e-2 / 1e-6 for NS5, Muon,
   Polar Express, PRISM3, PRISM5 (sketch and exact) on Gaussian, Student-t, log-uniform and heavy-tailed
   spectra at several aspect ratios (float64, so the tolerances measure the method, not round-off).
2. Coupled square root of SPD matrices: NS5 (α = 3/8) vs PRISM5.
3. Training on digits: AdamW vs Muon vs PrismMuon (MLP); Shampoo with eigh vs PRISM roots (CNN).

Every claim's ``held`` is computed from these runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from prism_matfn import baselines
from prism_matfn.matfn import polar, sqrtm_and_inv
from prism_matfn.spectra import spd_matrix, spectrum_matrix
from shared_core.cli import ReproduceArgs, progress, reproduce_main
from shared_core.device import num_threads
from shared_core.report import Report, subplots

TOLERANCES = (1e-2, 1e-6)

POLAR_METHODS: dict[str, Callable[[torch.Tensor, int], Any]] = {
    "NS5": lambda G, k: baselines.newton_schulz(G, k, "quintic", return_info=True),
    "Muon": lambda G, k: baselines.newton_schulz(G, k, "muon", return_info=True),
    "PolarExpress": lambda G, k: baselines.polar_express(G, k, return_info=True),
    "PRISM3": lambda G, k: polar(G, steps=k, degree=3, return_info=True),
    "PRISM5": lambda G, k: polar(G, steps=k, degree=5, return_info=True),
    "PRISM5-exact": lambda G, k: polar(G, steps=k, degree=5, fit="exact", return_info=True),
    "PRISM5+rescale": lambda G, k: polar(G, steps=k, spectral_rescale=True, return_info=True),
}


def polar_cases(args: ReproduceArgs) -> list[dict[str, Any]]:
    """(spectrum, m, n, options, well_conditioned_rectangular) for this run's size."""
    size = args.pick(
        smoke={"g": [(96, 24), (48, 48)], "t": (96, 24), "lu": (48, 24), "h": (48, 24)},
        quick={"g": [(1024, 256), (2048, 128), (384, 384)], "t": (1024, 256), "lu": (512, 256),
               "h": (512, 256)},
        full={"g": [(2048, 512), (4096, 128), (1024, 1024)], "t": (2048, 512), "lu": (1024, 512),
              "h": (2048, 1024)},
    )  # fmt: skip
    cases = [
        {"spectrum": "gaussian", "m": m, "n": n, "opts": {}, "easy": m > n} for m, n in size["g"]
    ]
    cases.append({"spectrum": "student_t", "m": size["t"][0], "n": size["t"][1], "opts": {},
                  "easy": True})  # fmt: skip
    cases.append({"spectrum": "log_uniform", "m": size["lu"][0], "n": size["lu"][1],
                  "opts": {"lower": 1e-3}, "easy": False})  # fmt: skip
    for kappa in args.pick(smoke=(0.1,), quick=(0.1, 0.5, 100.0), full=(0.1, 0.5, 100.0)):
        cases.append({"spectrum": "htmp", "m": size["h"][0], "n": size["h"][1],
                      "opts": {"kappa": kappa}, "easy": False})  # fmt: skip
    for case in cases:
        extra = ",".join(f"{k}={v}" for k, v in case["opts"].items())
        case["name"] = (
            f"{case['spectrum']}{'(' + extra + ')' if extra else ''} {case['m']}x{case['n']}"
        )
    return cases


def iterations_to(history: Sequence[float], tol: float) -> int | None:
    """First iteration count whose RMS residual is ≤ ``tol`` (None: never, within the run)."""
    return next((k for k, r in enumerate(history) if r <= tol), None)


FLOAT32_METHODS = ("NS5", "PolarExpress", "PRISM5")
FLOAT32_TOLERANCES = (1e-2, 1e-4)
"""float32 cannot reach RMS 1e-6 (its round-off floor is near 1e-6): the float32 run uses 1e-4."""


def run_polar_case(
    case: dict[str, Any], steps: int, seed: int, dtype: torch.dtype = torch.float64
) -> dict[str, list[float]]:
    G = spectrum_matrix(case["spectrum"], case["m"], case["n"], seed=seed, **case["opts"])
    G = G.to(dtype)
    names = POLAR_METHODS if dtype == torch.float64 else FLOAT32_METHODS
    return {name: POLAR_METHODS[name](G, steps)[1].residual_rms.tolist() for name in names}


def run_sqrt_case(name: str, n: int, steps: int, seed: int) -> dict[str, Any]:
    spectrum, lower = {"log-uniform [1e-4,1]": ("log_uniform", 1e-4),
                       "log-uniform [1e-6,1]": ("log_uniform", 1e-6),
                       "Marchenko-Pastur": ("wishart", 0.0)}[name]  # fmt: skip
    A = spd_matrix(spectrum, n, seed=seed, lower=lower)
    exact = baselines.eigh_inv_root(A, -2)
    out = {}
    runs: tuple[tuple[str, dict[str, Any]], ...] = (
        ("NS5", {"fit": "fixed", "alpha": 0.375}),
        ("PRISM5", {}),
    )
    for method, opts in runs:
        Y, _, info = sqrtm_and_inv(A, steps=steps, tol=1e-6, return_info=True, **opts)
        rel = float(torch.linalg.matrix_norm(Y - exact) / torch.linalg.matrix_norm(exact))
        out[method] = {"rms": info.residual_rms.tolist(), "iterations": info.iterations,
                       "relative_error": rel}  # fmt: skip
    return out


def _fmt_iters(k: int | None, steps: int) -> str:
    return f">{steps}" if k is None else str(k)


def _as_number(k: int | None, steps: int) -> float:
    return math.inf if k is None else float(k)


def polar_section(report: Report, args: ReproduceArgs) -> None:
    steps = args.pick(smoke=12, quick=30, full=40)
    cases = polar_cases(args)
    results = {}
    for case in progress(cases, desc="polar cases"):
        results[case["name"]] = report.cached(
            f"polar-{case['name']}", lambda c=case: run_polar_case(c, steps, args.seed)
        )
    rows, residual_rows = [], []
    for case in cases:
        res = results[case["name"]]
        for method, hist in res.items():
            row = {"case": case["name"], "method": method}
            for tol in TOLERANCES:
                row[f"iters to {tol:g}"] = _fmt_iters(iterations_to(hist, tol), steps)
            rows.append(row)
            residual_rows.append({"case": case["name"], "method": method,
                                  **{f"k={k}": hist[k] for k in (3, 5, 8) if k < len(hist)}})  # fmt: skip
    report.table("Polar: iterations to RMS residual (float64)", rows)
    report.table("Polar: RMS residual sqrt(mean((1-s^2)^2)) after k iterations", residual_rows)

    def count(case: dict[str, Any], method: str, tol: float) -> float:
        return _as_number(iterations_to(results[case["name"]][method], tol), steps)

    def versus(
        method: str, baseline: str, subset: list[dict[str, Any]]
    ) -> tuple[bool, float, float, list[str]]:
        pairs = [
            (count(c, method, t), count(c, baseline, t), c["name"], t)
            for c in subset
            for t in TOLERANCES
        ]
        failed = [f"{name} @ {t:g}: {a:g} vs {b:g}" for a, b, name, t in pairs if a > b]
        finite = [(a, b) for a, b, _, _ in pairs if math.isfinite(a) and math.isfinite(b)]
        if not finite:  # nothing converged on either side: the comparison is n/a, never held
            return False, math.nan, math.nan, failed
        return not failed, sum(a for a, _ in finite), sum(b for _, b in finite), failed

    held, ours, base, failed = versus("PRISM5", "NS5", cases)
    report.claim(
        "PRISM5 needs no more iterations than NS5 on every case", "total iterations to 1e-2 and 1e-6",
        ours, base, direction="lower", baseline_name="NS5", held=held,
        note="; ".join(failed) or f"held on all {len(cases)} cases at both tolerances",
    )  # fmt: skip
    easy = [c for c in cases if c["easy"]]
    held, ours, base, failed = versus("PRISM5", "PolarExpress", easy)
    report.claim(
        "PRISM5 beats Polar Express on well-conditioned rectangular cases",
        "total iterations to 1e-2 and 1e-6 (Gaussian/Student-t, m > n)", ours, base,
        direction="lower", baseline_name="PolarExpress", held=held,
        note="; ".join(failed) or f"held on {len(easy)} cases",
    )  # fmt: skip
    hard = [c for c in cases if not c["easy"]]
    held, ours, base, failed = versus("PRISM5", "PolarExpress", hard)
    report.claim(
        "PRISM5 vs Polar Express where many singular values are tiny (square, log-uniform, HTMP)",
        "total iterations to 1e-2 and 1e-6", ours, base, direction="lower",
        baseline_name="PolarExpress", held=held,
        note=("Polar Express leads: " + "; ".join(failed)) if failed else "PRISM5 not behind here",
    )  # fmt: skip
    held, ours, base, failed = versus("PRISM5+rescale", "PolarExpress", cases)
    report.claim(
        "PRISM5 with the author's spectral_rescale needs no more iterations than Polar Express",
        "total iterations to 1e-2 and 1e-6, every case", ours, base, direction="lower",
        baseline_name="PolarExpress", held=held,
        note=("Polar Express still leads: " + "; ".join(failed)) if failed
        else f"held on all {len(cases)} cases (a post-paper heuristic, off by default)",
    )  # fmt: skip
    k5 = [(results[c["name"]]["PRISM5"][5], results[c["name"]]["NS5"][5]) for c in easy]
    report.claim(
        "PRISM5 residual at k=5 far below NS5 on well-conditioned rectangular cases",
        "geometric mean RMS residual at k=5", math.prod(a for a, _ in k5) ** (1 / len(k5)),
        math.prod(b for _, b in k5) ** (1 / len(k5)), direction="lower", baseline_name="NS5",
        held=all(a < 1e-2 * b for a, b in k5), note="held means ≥ 100× lower on every such case",
    )  # fmt: skip
    diffs = [abs(count(c, "PRISM5", t) - count(c, "PRISM5-exact", t)) for c in cases for t in TOLERANCES
             if math.isfinite(count(c, "PRISM5", t)) and math.isfinite(count(c, "PRISM5-exact", t))]  # fmt: skip
    report.claim(
        "sketched α (p=8) converges as fast as the exact fit", "max abs. difference in iterations",
        max(diffs, default=0.0), 0.0, direction="close", tolerance=1.0, baseline_name="exact fit",
    )  # fmt: skip
    float32_section(report, cases, steps, args)
    cols = 4
    rows_n = math.ceil(len(cases) / cols)
    fig, axes = subplots(rows_n, cols, figsize=(4 * cols, 3 * rows_n), squeeze=False)
    for ax, case in zip(axes.flat, cases, strict=False):
        for method, hist in results[case["name"]].items():
            ax.semilogy([max(h, 1e-17) for h in hist], label=method)
        ax.set_title(case["name"], fontsize=8)
        ax.set_xlabel("iteration")
    for ax in list(axes.flat)[len(cases) :]:
        ax.axis("off")
    axes.flat[0].set_ylabel("RMS residual")
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    report.figure("polar_residuals", fig, "RMS residual of I − XᵀX per iteration (float64)")


def float32_section(
    report: Report, cases: list[dict[str, Any]], steps: int, args: ReproduceArgs
) -> None:
    """The Polar Express comparison again in float32 (the spec asks for both precisions)."""
    results = {}
    for case in progress(cases, desc="polar cases (float32)"):
        results[case["name"]] = report.cached(
            f"polar32-{case['name']}",
            lambda c=case: run_polar_case(c, steps, args.seed, torch.float32),
        )
    rows = []
    for case in cases:
        for method, hist in results[case["name"]].items():
            rows.append({"case": case["name"], "method": method, **{
                f"iters to {t:g}": _fmt_iters(iterations_to(hist, t), steps)
                for t in FLOAT32_TOLERANCES}})  # fmt: skip
    report.table("Polar: iterations to RMS residual (float32)", rows)

    def count(case: dict[str, Any], method: str, tol: float) -> float:
        return _as_number(iterations_to(results[case["name"]][method], tol), steps)

    for label, subset in (("well-conditioned rectangular", [c for c in cases if c["easy"]]),
                          ("many tiny singular values", [c for c in cases if not c["easy"]])):  # fmt: skip
        pairs = [(count(c, "PRISM5", t), count(c, "PolarExpress", t), c["name"], t)
                 for c in subset for t in FLOAT32_TOLERANCES]  # fmt: skip
        behind = [f"{n} @ {t:g}: {a:g} vs {b:g}" for a, b, n, t in pairs if a > b]
        finite = [(a, b) for a, b, _, _ in pairs if math.isfinite(a) and math.isfinite(b)]
        report.claim(
            f"float32: PRISM5 needs no more iterations than Polar Express ({label})",
            "total iterations to 1e-2 and 1e-4", sum(a for a, _ in finite) if finite else math.nan,
            sum(b for _, b in finite) if finite else math.nan, direction="lower",
            baseline_name="PolarExpress", held=bool(finite) and not behind,
            note=("Polar Express leads: " + "; ".join(behind)) if behind
            else f"held on {len(subset)} cases",
        )  # fmt: skip


def sqrt_section(report: Report, args: ReproduceArgs) -> None:
    n = args.pick(smoke=24, quick=128, full=256)
    steps = args.pick(smoke=30, quick=40, full=40)
    rows, wins = [], []
    for name in ("log-uniform [1e-4,1]", "log-uniform [1e-6,1]", "Marchenko-Pastur"):
        res = report.cached(
            f"sqrt-{name}-{n}", lambda nm=name: run_sqrt_case(nm, n, steps, args.seed)
        )
        for method in ("NS5", "PRISM5"):
            rows.append({"spectrum": name, "n": n, "method": method,
                         "iters to RMS 1e-6": res[method]["iterations"],
                         "relative error of sqrt": res[method]["relative_error"]})  # fmt: skip
        wins.append((res["PRISM5"]["iterations"], res["NS5"]["iterations"]))
    report.table("Coupled square root (I − ZY residual)", rows)
    report.claim(
        "PRISM5 coupled sqrt needs fewer iterations than NS5", "total iterations to RMS 1e-6",
        sum(a for a, _ in wins), sum(b for _, b in wins), direction="lower", baseline_name="NS5",
        held=all(a < b for a, b in wins), note="held means fewer on every spectrum",
    )  # fmt: skip


def _mean_se(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error (0 for a single value)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var / n)


def _paired_no_more(ours: Sequence[float], base: Sequence[float]) -> tuple[bool, float, float]:
    """Whether ``ours`` needs no more steps than ``base`` within seed noise, paired by seed.

    Returns (held, mean of the per-seed differences, 2 s.e. of them). A seed where ours never
    reaches the target and the baseline does can't be excused by noise: not held.
    """
    if any(math.isinf(a) and not math.isinf(b) for a, b in zip(ours, base, strict=True)):
        return False, math.inf, math.nan
    diffs = [0.0 if math.isinf(a) else a - b for a, b in zip(ours, base, strict=True)]
    mean, se = _mean_se(diffs)
    return mean <= 2 * se, mean, 2 * se


def _steps_to(losses: Sequence[float], target: float, window: int) -> float:
    smooth = _running_mean(losses, window)
    return next((float(i + 1) for i, v in enumerate(smooth) if v <= target), math.inf)


def muon_training_section(report: Report, args: ReproduceArgs) -> None:
    """The fair optimizer comparison: equal budget, lr tuned per optimizer, fresh evaluation seeds."""
    from prism_matfn.training import LR_GRIDS, final_loss, muon_comparison

    steps = args.pick(smoke=6, quick=200, full=1000)
    tune = args.pick(smoke=(0,), quick=(0,), full=(0, 1, 2))
    fresh = args.pick(smoke=(10,), quick=(10, 11, 12), full=(10, 11, 12, 13, 14))
    grids = args.pick(
        smoke={k: v[len(v) // 2 :][:1] for k, v in LR_GRIDS.items()}, quick=LR_GRIDS, full=LR_GRIDS
    )
    res = report.cached(
        f"train-muon-fair-{steps}-{tune}-{fresh}",
        lambda: muon_comparison(steps, tune, fresh, grids),
    )
    window = res["window"]
    tuning_rows = [
        {"optimizer": name, "lr": lr, f"mean final loss, tuning seeds {list(tune)}":
         sum(v) / len(v), "chosen": "yes" if float(lr) == res["chosen"][name] else ""}
        for name, table in res["tuning"].items() for lr, v in table.items()
    ]  # fmt: skip
    report.table("MLP on digits: lr search (same grid for every Muon-type optimizer)", tuning_rows)
    bracket_rows = [
        {"optimizer": name, "grid": ", ".join(f"{lr:g}" for lr in grid),
         "chosen": f"{res['chosen'][name]:g}",
         "interior": "yes" if grid.index(res["chosen"][name]) not in (0, len(grid) - 1)
         else "NO: the optimum may lie outside the grid"}
        for name, grid in grids.items() if len(grid) >= 3
    ]  # fmt: skip
    if bracket_rows:
        report.table(
            "MLP on digits: is each tuned lr inside its grid (not at an end)?", bracket_rows
        )
    finals = {n: [final_loss(r["losses"], window) for r in runs] for n, runs in res["runs"].items()}
    muon_mean, muon_se = _mean_se(finals["Muon"])
    target = muon_mean + 2 * muon_se  # Muon's final loss, within seed noise
    reach = {n: [_steps_to(r["losses"], target, window) for r in runs]
             for n, runs in res["runs"].items()}  # fmt: skip
    rows = []
    for name, runs in res["runs"].items():
        mean, se = _mean_se(finals[name])
        rows.append({
            "optimizer": name, "lr": res["chosen"][name], "steps": steps,
            f"final loss (mean of last {window}), mean ± s.e.": f"{mean:.4g} ± {se:.2g}",
            "steps to Muon's final loss": ", ".join(_fmt_iters(None if math.isinf(k) else int(k),
                                                                steps) for k in reach[name]),
            "test accuracy": sum(r["test_accuracy"] for r in runs) / len(runs),
            "update spectral norm / lr": sum(r["update_spectral_norm"] for r in runs) / len(runs),
            "optimizer time (s)": sum(r["optimizer_s"] for r in runs) / len(runs),
        })  # fmt: skip
    report.table(f"MLP on digits: fresh seeds {list(fresh)} at each optimizer's tuned lr", rows)
    by = {r["optimizer"]: r for r in rows}
    n_seeds = len(fresh)
    prism_mean, prism_se = _mean_se(finals["PrismMuon"])
    mean_reach = {n: sum(v) / len(v) for n, v in reach.items()}
    held, mean_diff, tol = _paired_no_more(reach["PrismMuon"], reach["Muon"])
    report.claim(
        "PrismMuon reaches Muon's final loss (within seed noise) in no more steps",
        "mean steps to Muon's mean final loss + 2 s.e.", mean_reach["PrismMuon"],
        mean_reach["Muon"], direction="lower", baseline_name="Muon", samples=n_seeds,
        tolerance=tol if math.isfinite(tol) else 0.0, held=held,
        settings={"steps": steps, "target": target},
        note=f"target {target:.4g}; per seed PrismMuon {reach['PrismMuon']}, Muon {reach['Muon']};"
        f" paired difference {mean_diff:.3g} steps, tolerance 2 s.e. of it = {tol:.3g}",
    )  # fmt: skip
    noise = 2 * math.sqrt(prism_se**2 + muon_se**2)
    report.claim(
        "PrismMuon's final loss is no worse than Muon's (within seed noise)", "final train loss",
        prism_mean, muon_mean, direction="lower", baseline_name="Muon", tolerance=noise,
        samples=n_seeds, settings={"steps": steps},
        note=f"tolerance = 2 s.e. of the difference over {n_seeds} fresh seeds = {noise:.2g}",
    )  # fmt: skip
    fixed_mean, fixed_se = _mean_se(finals["PrismMuon-fixed-alpha"])
    noise_fixed = 2 * math.sqrt(fixed_se**2 + muon_se**2)
    report.claim(
        "PrismMuon with α fixed at 29/20 (no fit) is no worse than Muon (within seed noise)",
        "final train loss", fixed_mean, muon_mean, direction="lower", baseline_name="Muon",
        tolerance=noise_fixed, samples=n_seeds, settings={"steps": steps},
        note=f"the fit-free arm; tolerance 2 s.e. = {noise_fixed:.2g}: if held, the tie with Muon "
        "does not need the α fit",
    )  # fmt: skip
    gap = 2 * math.sqrt(prism_se**2 + fixed_se**2)
    report.claim(
        "the α fit lowers PrismMuon's final loss below α fixed at 29/20 (beyond seed noise)",
        "final train loss", prism_mean, fixed_mean - gap, direction="lower",
        baseline_name="PrismMuon-fixed-alpha − 2 s.e.", samples=n_seeds,
        settings={"steps": steps},
        note=f"fit {prism_mean:.4g} ± {prism_se:.2g} vs fixed α {fixed_mean:.4g} ± {fixed_se:.2g}; "
        f"held needs the fit below fixed α by more than 2 s.e. = {gap:.2g}",
    )  # fmt: skip
    adam_mean, _ = _mean_se(finals["AdamW"])
    report.claim(
        "PrismMuon beats AdamW", "final train loss", prism_mean, adam_mean, direction="lower",
        baseline_name="AdamW", samples=n_seeds, settings={"steps": steps},
    )  # fmt: skip
    frob_ratio = (
        by["PrismMuon-frobenius"]["update spectral norm / lr"]
        / by["Muon"]["update spectral norm / lr"]
    )
    prism_ratio = (
        by["PrismMuon"]["update spectral norm / lr"] / by["Muon"]["update spectral norm / lr"]
    )
    at_bound = res["alpha_at_upper_bound"]
    pinned = bool(at_bound) and at_bound[0] > 0.9
    report.table("MLP on digits: step size and α (computed from this run)", [
        {"quantity": "spectral norm of the step / lr, PrismMuon (update_scale='muon') ÷ Muon",
         "value": prism_ratio},
        {"quantity": "same, PrismMuon-frobenius (the 0.1 default) ÷ Muon", "value": frob_ratio},
        *({"quantity": f"fraction of fitted α at the bound 29/20, PRISM iteration k={k + 1}",
           "value": f} for k, f in enumerate(at_bound)),
        {"quantity": "α pinned at its upper bound on the first iteration (> 90 % of calls)",
         "value": "yes: low-rank momenta, PRISM acts as a fixed quintic there" if pinned else "no"},
    ])  # fmt: skip
    _training_figure(report, res["runs"], window, "training_curves_muon",
                     "Digits MLP: training loss on the fresh seeds (running mean)")  # fmt: skip


def shampoo_training_section(report: Report, args: ReproduceArgs) -> None:
    from prism_matfn.training import final_loss, shampoo_comparison, shampoo_step_timing

    steps = args.pick(smoke=6, quick=300, full=1500)
    seeds = args.pick(smoke=(0,), quick=(0, 1, 2), full=(0, 1, 2, 3, 4))
    shampoo = report.cached(
        f"train-shampoo-{steps}-{seeds}", lambda: shampoo_comparison(steps, seeds)
    )
    window = max(1, steps // 10)
    finals = {n: [final_loss(r["losses"], window) for r in runs] for n, runs in shampoo.items()}
    rows = []
    for name, runs in shampoo.items():
        mean, se = _mean_se(finals[name])
        rows.append({"optimizer": name, "steps": steps,
                     f"train loss (mean of last {window}), mean ± s.e.": f"{mean:.4g} ± {se:.2g}",
                     "test accuracy": sum(r["test_accuracy"] for r in runs) / len(runs)})  # fmt: skip
    report.table(f"CNN on digits: Shampoo roots, seeds {list(seeds)}", rows)
    for name, label in (("Shampoo-PRISM", "5 PRISM iterations"),
                        ("Shampoo-identity", "identity roots (negative control: must not hold)")):  # fmt: skip
        mean_diff, tol = _paired_gap(finals[name], finals["Shampoo-eigh"])
        report.claim(
            f"Shampoo with {label} matches eigh roots", "final train loss (mean over seeds)",
            sum(finals[name]) / len(seeds), sum(finals["Shampoo-eigh"]) / len(seeds),
            direction="lower", tolerance=tol, baseline_name="Shampoo-eigh", samples=len(seeds),
            settings={"steps": steps},
            note=f"paired per-seed difference {mean_diff:.3g}; tolerance 2 s.e. of it = {tol:.2g}",
        )  # fmt: skip
    repeats = args.pick(smoke=2, quick=15, full=31)
    timing = report.cached(f"shampoo-timing-{repeats}", lambda: shampoo_step_timing(repeats))
    report.claim(
        "Shampoo with PRISM roots no slower than eigh (optimizer wall-clock)",
        "seconds per 10 optimizer steps (one root recomputation), median of interleaved pairs",
        timing["candidate_s"], timing["baseline_s"], direction="lower",
        baseline_name="Shampoo-eigh", held=timing["ratio"] <= 1.0, samples=timing["repeats"],
        note=f"PRISM/eigh = {timing['ratio']:.2f} [{timing['ratio_q25']:.2f}, "
        f"{timing['ratio_q75']:.2f}] (median [quartiles] of {timing['repeats']} interleaved pairs, "
        "shared_core.bench) on CPU with factors ≤ 144×144",
    )  # fmt: skip
    _training_figure(report, shampoo, window, "training_curves",
                     "Digits CNN with Shampoo (running mean)")  # fmt: skip


def _paired_gap(ours: Sequence[float], base: Sequence[float]) -> tuple[float, float]:
    """Mean per-seed difference ``ours − base`` and 2 s.e. of it (the seed-noise tolerance)."""
    mean, se = _mean_se([a - b for a, b in zip(ours, base, strict=True)])
    return mean, 2 * se


def _training_figure(
    report: Report, runs: dict[str, list[dict[str, Any]]], window: int, name: str, caption: str
) -> None:
    fig, ax = subplots(1, 1, figsize=(6, 3.5))
    for label, seeds in runs.items():
        for i, run in enumerate(seeds):
            ax.plot(_running_mean(run["losses"], window), label=label if i == 0 else None,
                    color=f"C{list(runs).index(label)}", alpha=0.8)  # fmt: skip
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("train loss (running mean)")
    ax.legend()
    fig.tight_layout()
    report.figure(name, fig, caption)


def _running_mean(values: Sequence[float], window: int) -> list[float]:
    return [
        sum(values[max(0, i - window + 1) : i + 1]) / min(window, i + 1) for i in range(len(values))
    ]


def run(args: ReproduceArgs) -> Report:
    report = Report(
        "prism-matfn",
        "PRISM: Distribution-free Adaptive Computation of Matrix Functions (CPU reproduction)",
        args.out,
        {"size": args.size, "seed": args.seed},
    )
    with num_threads(1):
        polar_section(report, args)
        sqrt_section(report, args)
        muon_training_section(report, args)
        shampoo_training_section(report, args)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    return reproduce_main(run, argv, description=__doc__ or "")


if __name__ == "__main__":
    raise SystemExit(main())
