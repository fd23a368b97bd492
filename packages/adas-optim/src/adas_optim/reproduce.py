"""Reproduce AdaS's claims at CPU scale: ``python -m adas_optim.reproduce [--quick|--full|--smoke]``.

A tiny Spikformer on scikit-learn's digits (spec section 5), AdamW against AdaS at equal lr over
paired seeds, with two controls: AdamW at the update norm AdaS actually took (is the gain only a
smaller step?) and, in the noise probe, AdaS with γ = ∞ (must equal AdamW).

Claims: (1) at lr 5e-3 AdaS's accuracy ≥ AdamW's; (2) ... and ≥ AdamW at AdaS's measured step size;
(3) at a small lr λ → 1 on large tensors, while (4) at lr 5e-3 it does not; (5) at the small lr the
two agree within 2 s.e. of the paired differences (floor 0.5 point); (6) the mini-batch variance of
the update direction at a fixed θ is lower for AdaS than AdamW on large tensors.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from adas_optim.training import RunConfig, digits_data, train, update_noise_probe
from shared_core.cli import ReproduceArgs, progress, reproduce_main
from shared_core.report import Report, subplots


def sign_test_p(wins: int, n: int) -> float:
    """Two-sided exact sign test: P(at least this lopsided | fair coin), ties dropped beforehand."""
    if n == 0:
        return 1.0
    k = max(wins, n - wins)
    tail = sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired(ours: list[float], base: list[float]) -> dict[str, float]:
    """Mean ± s.e. of the paired differences, wins (ties dropped) and the sign test."""
    diffs = [a - b for a, b in zip(ours, base, strict=True)]
    se = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else math.nan
    wins, losses = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
    return {
        "mean_diff": statistics.fmean(diffs),
        "se": se,
        "wins": wins,
        "losses": losses,
        "sign_p": sign_test_p(wins, wins + losses),
    }


def mean_large_lambda(result: dict[str, Any]) -> float:
    """Mean λ over the large tensors and every step of the run.

    Every step, not the end of it: the cosine schedule drives η → 0 and so λ → 1 at the end of any
    run, which would make the "λ < 1 at lr 5e-3" control hold vacuously false.
    """
    values = [v for trace in result["lambdas"].values() for v in trace]
    return statistics.fmean(values) if values else math.nan


def _settings(args: ReproduceArgs) -> dict[str, Any]:
    return {
        "size": args.size,
        "seed": args.seed,
        "seeds": args.pick(smoke=1, quick=3, full=5),
        "epochs": args.pick(smoke=1, quick=8, full=15),
        "small_lr_epochs": args.pick(smoke=1, quick=4, full=15),
        "dim": args.pick(smoke=16, quick=64, full=64),
        "n_train": args.pick(smoke=64, quick=None, full=None),
        "lr": 5e-3,
        "small_lr": 1e-3,
        "gamma": 1.0,
        "grid_gammas": args.pick(smoke=[], quick=[], full=[0.5, 2.0]),
        "grid_lrs": args.pick(smoke=[], quick=[], full=[2e-3, 5e-3]),
        "probe_warm_epochs": args.pick(smoke=1, quick=2, full=3),
        "probe_batches": args.pick(smoke=3, quick=8, full=8),
    }


def run(args: ReproduceArgs) -> Report:
    import torch

    # Tiny models: one thread is faster than two contended ones, and the timings are steadier.
    torch.set_num_threads(1)
    s = _settings(args)
    report = Report(
        "adas-optim", "AdaS: Adaptive Gradient Descent for Spiking Transformers", args.out, s
    )
    data = digits_data()
    seeds = [args.seed + i for i in range(s["seeds"])]

    def cfg(opt: str, lr: float, seed: int, **kw: Any) -> RunConfig:
        kw.setdefault("epochs", s["epochs"])
        return RunConfig(opt, lr, seed, dim=s["dim"], n_train=s["n_train"], **kw)

    def cached_run(c: RunConfig) -> dict[str, Any]:
        key = f"{c.optimizer}-lr{c.lr:.6g}-g{c.gamma:g}-s{c.seed}-e{c.epochs}"
        return report.cached(key, lambda: train(c, data))

    runs = _main_runs(s, seeds, cfg, cached_run)
    _accuracy_claims(report, s, runs)
    _lambda_claims(report, s, runs)
    _noise_claim(report, s, seeds, data)
    if s["grid_gammas"] or s["grid_lrs"]:
        _grid(report, s, seeds, cfg, cached_run, runs)
    _figures(report, s, runs)
    return report


def _main_runs(
    s: dict[str, Any], seeds: list[int], cfg: Any, cached_run: Any
) -> dict[str, list[Any]]:
    """AdamW, AdaS and AdamW at AdaS's step size at lr; AdamW and AdaS at the small lr."""
    runs: dict[str, list[Any]] = {
        k: [] for k in ("adamw", "adas", "adamw_matched", "adamw_small", "adas_small")
    }
    bar = progress(total=5 * len(seeds), desc="digits runs")
    for seed in seeds:
        runs["adamw"].append(cached_run(cfg("adamw", s["lr"], seed)))
        runs["adas"].append(cached_run(cfg("adas", s["lr"], seed, gamma=s["gamma"])))
        # The control: AdamW whose lr is scaled so its mean ‖Δθ‖ is AdaS's, measured on this seed.
        ratio = runs["adas"][-1]["mean_update_norm"] / runs["adamw"][-1]["mean_update_norm"]
        runs["adamw_matched"].append(cached_run(cfg("adamw", s["lr"] * ratio, seed)))
        runs["adamw_matched"][-1]["lr"] = s["lr"] * ratio
        small = {"epochs": s["small_lr_epochs"]}
        runs["adamw_small"].append(cached_run(cfg("adamw", s["small_lr"], seed, **small)))
        runs["adas_small"].append(
            cached_run(cfg("adas", s["small_lr"], seed, gamma=s["gamma"], **small))
        )
        bar.update(5)
    bar.close()
    return runs


def _acc(results: list[dict[str, Any]]) -> list[float]:
    return [r["accuracy"] for r in results]


def _accuracy_claims(report: Report, s: dict[str, Any], runs: dict[str, list[Any]]) -> None:
    n = len(runs["adas"])
    rows = []
    for label, key, lr in (
        ("AdamW", "adamw", s["lr"]),
        ("AdaS", "adas", s["lr"]),
        ("AdamW at AdaS's step size", "adamw_matched", None),
        ("AdamW", "adamw_small", s["small_lr"]),
        ("AdaS", "adas_small", s["small_lr"]),
    ):
        acc = _acc(runs[key])
        rows.append(
            {
                "optimizer": label,
                "lr": lr if lr is not None else statistics.fmean(r["lr"] for r in runs[key]),
                "accuracy mean": statistics.fmean(acc),
                "accuracy std": statistics.stdev(acc) if len(acc) > 1 else math.nan,
                "per seed": " ".join(f"{a:.4f}" for a in acc),
                "mean update norm": statistics.fmean(r["mean_update_norm"] for r in runs[key]),
            }
        )
    report.table("Accuracy on the 540 test digits", rows)
    for name, base_key, base_name in (
        ("AdaS accuracy >= AdamW at equal lr", "adamw", "AdamW"),
        (
            "AdaS accuracy >= AdamW at AdaS's measured step size (control)",
            "adamw_matched",
            "AdamW, lr matched to AdaS's update norm",
        ),
    ):
        ours, base = _acc(runs["adas"]), _acc(runs[base_key])
        st = paired(ours, base)
        report.claim(
            name,
            f"test accuracy, mean of {n} paired seeds, lr {s['lr']:g}",
            statistics.fmean(ours),
            statistics.fmean(base),
            direction="higher",
            baseline_name=base_name,
            samples=n,
            note=(
                f"paired difference {st['mean_diff']:+.4f} ± {st['se']:.4f} (s.e.), AdaS better in "
                f"{st['wins']}, worse in {st['losses']} of {n} seeds, sign test p = {st['sign_p']:.2f}"
                + (
                    " (within 2 s.e. of zero: not significant)"
                    if abs(st["mean_diff"]) <= 2 * st["se"]
                    else ""
                )
            ),
        )
    ours, base = _acc(runs["adas_small"]), _acc(runs["adamw_small"])
    st = paired(ours, base)
    tol = max(2 * st["se"], 0.005) if not math.isnan(st["se"]) else 0.005
    report.claim(
        "At a small lr AdaS and AdamW agree",
        f"test accuracy, mean of {n} paired seeds, lr {s['small_lr']:g}",
        statistics.fmean(ours),
        statistics.fmean(base),
        direction="close",
        baseline_name="AdamW",
        tolerance=tol,
        samples=n,
        note=f"tolerance max(2 s.e., 0.005) = {tol:.4f}; paired difference {st['mean_diff']:+.4f}",
    )


def _lambda_claims(report: Report, s: dict[str, Any], runs: dict[str, list[Any]]) -> None:
    n = len(runs["adas"])
    small = statistics.fmean(mean_large_lambda(r) for r in runs["adas_small"])
    big = statistics.fmean(mean_large_lambda(r) for r in runs["adas"])
    report.claim(
        "At a small lr lambda -> 1 on large tensors (the gamma/eta knob)",
        f"mean λ over tensors >= 1000 elements and all steps, lr {s['small_lr']:g}",
        small,
        0.99,
        direction="higher",
        baseline_name="threshold 0.99",
        samples=n,
    )
    report.claim(
        "At lr 5e-3 lambda < 1 on large tensors (control: the mixing is active)",
        f"mean λ over tensors >= 1000 elements and all steps, lr {s['lr']:g}",
        big,
        0.99,
        direction="lower",
        baseline_name="threshold 0.99",
        samples=n,
    )


def _noise_claim(report: Report, s: dict[str, Any], seeds: list[int], data: Any) -> None:
    probes = []
    for seed in progress(seeds, desc="noise probe"):
        probes.append(
            report.cached(
                f"probe-s{seed}",
                lambda seed=seed: update_noise_probe(
                    seed,
                    data,
                    lr=s["lr"],
                    gamma=s["gamma"],
                    warm_epochs=s["probe_warm_epochs"],
                    dim=s["dim"],
                    k=s["probe_batches"],
                    n_train=s["n_train"],
                ),
            )
        )
    labels = list(probes[0])
    report.table(
        "Update-noise proxies at a fixed theta (large tensors, mean over seeds)",
        [
            {
                "optimizer": label,
                "relative mini-batch variance of the update": statistics.fmean(
                    p[label]["rel_variance"] for p in probes
                ),
                "cosine with the full-batch gradient": statistics.fmean(
                    p[label]["cosine"] for p in probes
                ),
            }
            for label in labels
        ],
    )
    ours = [p["AdaS"]["rel_variance"] for p in probes]
    base = [p["AdamW"]["rel_variance"] for p in probes]
    control = [p["AdaS(gamma=inf)"]["rel_variance"] for p in probes]
    st = paired(ours, base)
    report.claim(
        "Mini-batch variance of the update direction is lower for AdaS (large tensors)",
        "E‖u − ū‖²/‖ū‖² over mini-batches at a fixed θ, mean of tensors >= 1000 elements",
        statistics.fmean(ours),
        statistics.fmean(base),
        direction="lower",
        baseline_name="AdamW",
        samples=len(probes),
        note=(
            f"lower in {st['losses']} of {len(probes)} seeds; control AdaS(γ=∞) "
            f"{statistics.fmean(control):.4g} must equal AdamW {statistics.fmean(base):.4g}"
        ),
    )


def _grid(
    report: Report,
    s: dict[str, Any],
    seeds: list[int],
    cfg: Any,
    cached_run: Any,
    runs: dict[str, list[Any]],
) -> None:
    """--full: AdaS(γ) against AdamW over the spec's grid of lr and γ."""
    rows = []
    for lr in s["grid_lrs"]:
        base = [cached_run(cfg("adamw", lr, seed)) for seed in seeds]
        for gamma in [s["gamma"], *s["grid_gammas"]]:
            ours = [cached_run(cfg("adas", lr, seed, gamma=gamma)) for seed in seeds]
            a, b = _acc(ours), _acc(base)
            st = paired(a, b)
            rows.append(
                {
                    "lr": lr,
                    "gamma": gamma,
                    "AdaS mean": statistics.fmean(a),
                    "AdaS std": statistics.stdev(a),
                    "AdamW mean": statistics.fmean(b),
                    "AdamW std": statistics.stdev(b),
                    "wins/losses": f"{st['wins']}/{st['losses']}",
                    "sign test p": st["sign_p"],
                    "mean λ (large)": statistics.fmean(mean_large_lambda(r) for r in ours),
                }
            )
    report.table("Grid: AdaS(gamma) against AdamW, paired seeds", rows)


def _figures(report: Report, s: dict[str, Any], runs: dict[str, list[Any]]) -> None:
    fig, axes = subplots(1, 2, figsize=(11, 3.8), sharey=True)
    for ax, key, lr in ((axes[0], "adas", s["lr"]), (axes[1], "adas_small", s["small_lr"])):
        for name, trace in runs[key][0]["lambdas"].items():
            ax.plot(trace, lw=0.8, label=name)
        ax.set_title(f"AdaS λ per tensor (≥ 1000 el.), lr {lr:g}, γ {s['gamma']:g}")
        ax.set_xlabel("step")
    axes[0].set_ylabel("λ (1 = AdamW)")
    axes[1].legend(fontsize=6, loc="lower right")
    report.figure("lambda_per_tensor", fig, "λ per large tensor over training, seed 0")


def main(argv: Sequence[str] | None = None) -> int:
    return reproduce_main(run, argv, description=__doc__ or "")


if __name__ == "__main__":
    raise SystemExit(main())
