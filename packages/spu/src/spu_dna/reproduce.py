"""Reproduce the paper's claims at CPU scale: ``python -m spu_dna.reproduce [--smoke|--quick|--full]``.

The three generated tasks (local motif, long-range order and distance, periodicity) with the full SPU,
its ablations (-LPL, -DPL-freq, -SPL) and four baselines (CNN, SDPA Transformer, Hyena-like FFT
convolution, transformers' Mamba) at matched size; then forward + backward time at L and 2L.
Each arm's learning rate is chosen per task from the same grid on a validation split (first seed);
every claim is computed from the measurements against a threshold of two standard errors.
"""

from __future__ import annotations

import importlib.util
import math
import statistics
from collections.abc import Sequence
from typing import Any

from shared_core.cli import ReproduceArgs, progress, reproduce_main
from shared_core.report import Report, claim_holds
from spu_dna.data.synthetic import bag_of_motifs_ceiling
from spu_dna.experiments import BASELINE_NAMES, MODELS, TASKS, run_one, time_scaling

QUASI_LINEAR = 2.4  # spec section 6: time(2L)/time(L) for L >= 4 k
# the ablation claims: removing the arm's layer costs most on the task named
ABLATION_CLAIMS = {"SPU -DPL-freq": "periodic", "SPU -LPL": "motif"}


def _settings(args: ReproduceArgs) -> dict[str, Any]:
    # --quick: 512 sequences x 3 epochs at L = 256 left every model at chance (issue 22); L = 128,
    # 1024 sequences x 4 epochs, batch 16 and a 10 % warm-up learn. At L = 128 the periodic segment is widened to
    # 64-128 bp (5-11 AA/TT steps, not 1-4). Every arm gets the same lr grid, chosen on validation.
    # --quick trains 768 sequences x 4 epochs (192 steps; at 96 steps SPU had barely left chance).
    # At lr 1e-3 alone every arm stayed weakly learned (session 5: AUROC 0.51-0.63 averaged over the
    # tasks); a reviewer's probes reached 0.84-0.88 long-range validation AUROC at 3e-3. So every arm
    # gets the grid {1e-3, 3e-3}, chosen per task on validation (first seed), then the spec's three
    # seeds at the chosen lr (issue 22). --smoke runs two seeds so that the seed statistics are
    # exercised in the tests.
    short_periodic = {"periodic": {"segment": (64, 128)}}
    return {
        "length": args.pick(64, 128, 1024),
        "n_train": args.pick(32, 768, 4000),
        "n_val": args.pick(16, 256, 500),
        "n_test": args.pick(32, 512, 1000),
        "epochs": args.pick(1, 4, 10),
        "batch": args.pick(32, 16, 32),
        "lr_grid": args.pick([1e-3, 3e-3], [1e-3, 3e-3], [3e-4, 1e-3, 3e-3]),
        "warmup": args.pick(0.01, 0.1, 0.01),
        "task_options": args.pick({"periodic": {"segment": (32, 64)}}, short_periodic, {}),
        "seeds": args.pick(2, 3, 3),
        "scaling_lengths": args.pick([64, 128], [4096, 8192], [4096, 8192]),
        "scaling_batch": 2,
        "scaling_repeats": args.pick(2, 5, 9),
        # which scan the Mamba baseline runs (the same recurrence; mambapy's is ~4x faster on CPU)
        "mamba_scan": "mambapy" if importlib.util.find_spec("mambapy") else "sequential",
    }


def _se(values: Sequence[float], binomial_var: Sequence[float], n: int) -> float:
    """Standard error of the mean of per-seed ``values``: the seed-to-seed one, floored by the
    binomial one (each value an accuracy, or a difference of accuracies, on ``n`` test sequences with
    variance ``binomial_var / n``), since two or three seeds can agree by chance."""
    seeds = len(values)
    spread = statistics.stdev(values) / math.sqrt(seeds) if seeds > 1 else 0.0
    binomial = math.sqrt(statistics.mean(binomial_var) / n / seeds)
    return max(spread, binomial)


def _var(p: float) -> float:
    return max(p * (1 - p), 1e-12)


def _training_code() -> list[Any]:
    """The modules a training run depends on: its checkpoints survive edits of the claims."""
    import spu_dna
    from spu_dna import (
        baselines,
        configuration,
        experiments,
        functional,
        kernels,
        layers,
        modeling,
        training,
    )
    from spu_dna.data import synthetic

    return [spu_dna, baselines, configuration, experiments, functional, kernels, layers, modeling,
            training, synthetic]  # fmt: skip


def _tune_and_train(
    report: Report,
    settings: dict[str, Any],
    seed: int,
    tasks: Sequence[str] = tuple(TASKS),
    models: Sequence[str] = MODELS,
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Every arm and task: each lr of the grid on the first seed, the best on validation kept; then
    the other seeds at that lr. Returns ``{(model, task): [run per seed]}``. ``tasks`` and ``models``
    let separate processes fill the checkpoints of one ``--out`` in parallel."""
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    code = _training_code()

    def one(model: str, task: str, s: int, lr: float) -> dict[str, Any]:
        key = f"train-{task}-{model.replace(' ', '')}-{s}-lr{lr:g}"
        return report.cached(key, lambda: run_one(model, task, settings, seed + s, lr), code=code)

    cells = [(m, t) for t in tasks for m in models]
    for model, task in progress(cells, desc="tune lr (seed 0)"):
        tried = [one(model, task, 0, lr) for lr in settings["lr_grid"]]
        chosen = dict(max(tried, key=lambda r: r["val_accuracy"]))
        chosen["val_by_lr"] = [r["val_accuracy"] for r in tried]  # the choice, for the report
        runs[model, task] = [chosen]
    extra = [(m, t, s) for m, t in cells for s in range(1, settings["seeds"])]
    for model, task, s in progress(extra, desc="other seeds"):
        runs[model, task].append(one(model, task, s, runs[model, task][0]["lr"]))
    return runs


def class_fractions(task: str, settings: dict[str, Any], seed: int) -> tuple[float, float]:
    """The positive fraction of ``run_one``'s validation and test splits of ``task`` at ``seed``
    (the same draw, regenerated: data only, nothing trained)."""
    n_train, n_val = settings["n_train"], settings["n_val"]
    options = settings.get("task_options", {}).get(task, {})
    labels = TASKS[task](
        n=n_train + n_val + settings["n_test"], length=settings["length"], seed=seed, **options
    ).labels
    return float(labels[n_train : n_train + n_val].mean()), float(labels[n_train + n_val :].mean())


def _constant(
    rs: Sequence[dict[str, Any]], fractions: Sequence[tuple[float, float]], n_val: int
) -> bool:
    """Every seed's test and validation accuracy equal a class fraction (positive or negative) of
    that split: the model predicts one class (a constant predictor)."""

    def at(acc: float, frac: float, n: float) -> bool:
        return min(abs(acc - frac), abs(acc - (1 - frac))) < 0.5 / n

    return all(
        at(r["accuracy"], test, r["n"]) and at(r["val_accuracy"], val, n_val)
        for r, (val, test) in zip(rs, fractions, strict=True)
    )


def _summary(
    runs: dict[tuple[str, str], list[dict[str, Any]]],
    settings: dict[str, Any] | None = None,
    seed: int = 0,
) -> dict[str, dict[str, Any]]:
    """``{model: {task: {"accuracy", "se", "auroc", "seconds", "params", "lr", "n", "constant"}}}``;
    ``constant`` (needs ``settings`` and the run's ``seed``): the arm predicts one class on every
    seed's validation and test split."""
    results: dict[str, dict[str, Any]] = {m: {} for m in MODELS}
    fractions = {}
    for (model, task), rs in runs.items():
        if settings is not None and task not in fractions:
            fractions[task] = [class_fractions(task, settings, seed + s) for s in range(len(rs))]
        accs = [r["accuracy"] for r in rs]
        results[model][task] = {
            "accuracy": statistics.mean(accs),
            "se": _se(accs, [_var(a) for a in accs], rs[0]["n"]),
            "accuracies": accs,
            "auroc": statistics.mean(r["auroc"] for r in rs),
            "aurocs": [r["auroc"] for r in rs],
            "seconds": statistics.mean(r["seconds_per_epoch"] for r in rs),
            "params": rs[0]["params"],
            "lr": rs[0]["lr"],
            "n": rs[0]["n"],
            "val_by_lr": rs[0].get("val_by_lr"),
            "saliency": rs[0].get("saliency"),
            "sites": rs[0].get("sites"),
            "constant": settings is not None and _constant(rs, fractions[task], settings["n_val"]),
        }
    return results


def _test_count(cell: dict[str, Any]) -> int:
    """The test sequences behind a cell: seeds x sequences per seed."""
    return len(cell["accuracies"]) * int(cell["n"])


def _paired(results: dict[str, Any], a: str, b: str, tasks: Sequence[str]) -> tuple[float, float]:
    """Mean over seeds of (a - b) accuracy averaged over ``tasks`` (same data per seed), its s.e."""
    seeds = len(results[a][tasks[0]]["accuracies"])
    diffs, var = [], []
    for s in range(seeds):
        pa = [results[a][t]["accuracies"][s] for t in tasks]
        pb = [results[b][t]["accuracies"][s] for t in tasks]
        diffs.append(statistics.mean(pa) - statistics.mean(pb))
        var.append(sum(_var(x) + _var(y) for x, y in zip(pa, pb, strict=True)) / len(tasks) ** 2)
    return statistics.mean(diffs), _se(diffs, var, results[a][tasks[0]]["n"])


def auroc_null_se(n: int) -> float:
    """Standard error of the AUROC of an uninformative score on ``n`` test sequences, half of each
    class (Hanley and McNeil at AUROC 0.5: variance ``(n1 + n2 + 1) / (12 n1 n2)``)."""
    half = n / 2
    return math.sqrt((n + 1) / (12 * half * half))


def auroc_se_at(auroc: float, n: int) -> float:
    """Standard error of an AUROC on ``n`` test sequences, half of each class (Hanley and McNeil)."""
    half = n / 2
    q1, q2 = auroc / (2 - auroc), 2 * auroc**2 / (1 + auroc)
    var = auroc * (1 - auroc) + (half - 1) * (q1 - auroc**2) + (half - 1) * (q2 - auroc**2)
    return math.sqrt(max(var, 1e-12) / (half * half))


def auroc_se(aurocs: Sequence[float], floor: float) -> float:
    """Standard error of the mean of per-seed ``aurocs``: the seed-to-seed one, floored by ``floor``
    (Hanley and McNeil's s.e. of one seed's AUROC), divided by sqrt(seeds) like the spread, since
    two or three seeds can agree by chance, and the spread can dwarf the floor (per-seed CNN
    long-range AUROCs 0.815, 0.687, 0.531: 2 s.e. 0.164 from the spread, 0.027 from the floor)."""
    seeds = len(aurocs)
    spread = statistics.stdev(aurocs) if seeds > 1 else 0.0
    return max(spread, floor) / math.sqrt(seeds)


def _learned_auroc(
    results: dict[str, Any], model: str, tasks: Sequence[str] = tuple(TASKS)
) -> tuple[float, float]:
    """``model``'s AUROC averaged over the tasks (and seeds) and the s.e. of that mean: the spread
    of the per-seed task means, floored by the null s.e. of a mean over the tasks (the control asks
    whether the AUROC is above 0.5)."""
    cells = [results[model][t] for t in tasks]
    per_seed = [statistics.mean(s) for s in zip(*(c["aurocs"] for c in cells), strict=True)]
    floor = auroc_null_se(cells[0]["n"]) / math.sqrt(len(tasks))
    return statistics.mean(per_seed), auroc_se(per_seed, floor)


def _claims_accuracy(
    report: Report,
    results: dict[str, Any],
    baselines: Sequence[str] = BASELINE_NAMES,
    tasks: Sequence[str] = tuple(TASKS),
) -> None:
    """SPU >= each baseline on the mean accuracy over the tasks, within 2 s.e. (paired over seeds).

    Two controls, else the comparison is vacuous and reported as not tested (never held): SPU beats
    chance (its mean accuracy - 0.5 > 2 s.e.), and so does the baseline (its mean AUROC > 0.5 + 2
    s.e.); at chance a comparison passes within noise and shows nothing. ``baselines`` and ``tasks``
    narrow it for :mod:`spu_dna.sweep`.
    """
    tasks = list(tasks)
    where = "over the three tasks" if tasks == list(TASKS) else f"over {'/'.join(tasks)}"
    ours = statistics.mean(results["SPU"][t]["accuracy"] for t in tasks)
    above, se_above = _paired_chance(results, "SPU", tasks)
    learned = above > 2 * se_above
    for name in baselines:
        diff, se = _paired(results, "SPU", name, tasks)
        auroc, auroc_se = _learned_auroc(results, name, tasks)
        baseline_learned = auroc > 0.5 + 2 * auroc_se
        note = f"paired over seeds: difference {diff:+.3f}, 2 s.e. {2 * se:.3f}"
        if diff < 0 <= diff + 2 * se:
            note += f"; {name} leads within noise: not refuted, and no support either"
        if not learned:
            note += "; not tested (vacuous): SPU is not above chance (0.5 + 2 s.e.)"
        constant = [t for t in tasks if results[name][t].get("constant")]
        if constant:
            note += (
                f"; {name} is a constant predictor on {'/'.join(constant)} (accuracy = class "
                "fraction on test and validation): its accuracy there is a threshold's collapse, "
                "read its AUROC"
            )
        if not baseline_learned:
            note += (
                f"; not tested (vacuous): {name} learned nothing (mean AUROC {auroc:.3f} <= "
                f"0.5 + 2 s.e. = {0.5 + 2 * auroc_se:.3f})"
            )
        report.claim(
            f"full SPU >= {name} on average {where}",
            "mean test accuracy",
            ours,
            ours - diff,
            direction="higher",
            baseline_name=name,
            tolerance=2 * se,
            held=learned and baseline_learned and diff >= -2 * se,
            samples=_test_count(results["SPU"][tasks[0]]),
            note=note,
        )


def _paired_chance(
    results: dict[str, Any], model: str, tasks: Sequence[str] = tuple(TASKS)
) -> tuple[float, float]:
    """Mean over seeds of (accuracy averaged over the tasks - 0.5) and its s.e."""
    per_seed = [
        statistics.mean(results[model][t]["accuracies"][s] for t in tasks) - 0.5
        for s in range(len(results[model][tasks[0]]["accuracies"]))
    ]
    var = [statistics.mean(_var(results[model][t]["accuracies"][s]) for t in tasks) / len(tasks)
           for s in range(len(per_seed))]  # fmt: skip
    return statistics.mean(per_seed), _se(per_seed, var, results[model][tasks[0]]["n"])


def _claim_ablation(report: Report, results: dict[str, Any], ablation: str, task: str) -> None:
    """Held when the drop on ``task`` exceeds 2 s.e. (it is real) and exceeds the runner-up's drop by
    more than 2 s.e. of that margin ('most' must be shown, not a point estimate's tie-break)."""
    drops = {t: _paired(results, "SPU", ablation, [t]) for t in TASKS}
    runner_up = max((t for t in TASKS if t != task), key=lambda t: drops[t][0])
    significant = drops[task][0] > 2 * drops[task][1]
    margin = drops[task][0] - drops[runner_up][0]
    margin_se = math.hypot(drops[task][1], drops[runner_up][1])
    strong = margin > 2 * margin_se
    note = (
        f"drops {', '.join(f'{t} {d:+.3f} (2 s.e. {2 * se:.3f})' for t, (d, se) in drops.items())}; "
        f"margin over {runner_up} {margin:+.3f} "
        f"({'>' if strong else '<='} 2 s.e. {2 * margin_se:.3f})"
    )
    if not significant:
        note += "; the drop on this task is within noise, so 'costs most' would hold vacuously"
    if significant and not strong:
        why = f"the drop on {runner_up} is larger" if margin <= 0 else "the margin is within noise"
        note += f"; not shown to cost most: {why}"
    report.claim(
        f"removing {ablation.split('-', 1)[1]} costs most on the {task} task",
        "accuracy drop (full - ablation)",
        drops[task][0],
        drops[runner_up][0],
        direction="higher",
        baseline_name=f"drop on {runner_up} (largest elsewhere)",
        held=significant and strong,
        samples=_test_count(results["SPU"][task]),
        note=note,
    )


def _claims_long_range(
    report: Report, results: dict[str, Any], models: Sequence[str] = MODELS
) -> None:
    """The CNN fails the long-range task; control: one of ``models`` learns it (the sweep narrows
    ``models`` to the arms it trained)."""
    ceiling = bag_of_motifs_ceiling()
    cells = {m: results[m]["long_range"] for m in models}
    best = max(cells, key=lambda m: cells[m]["accuracy"])
    learnable = cells[best]["accuracy"] - 2 * cells[best]["se"] > ceiling
    report.claim(
        "control: some model learns the long-range task (beats the bag-of-motifs ceiling)",
        "long-range accuracy",
        cells[best]["accuracy"],
        ceiling,
        direction="higher",
        baseline_name="position-free ceiling",
        held=learnable,
        samples=_test_count(cells[best]),
        note=f"best model: {best}; held when its accuracy - 2 s.e. ({2 * cells[best]['se']:.3f}) "
        "exceeds the ceiling",
    )
    cnn = cells["CNN"]
    cnn_auroc_se = auroc_se(cnn["aurocs"], auroc_se_at(cnn["auroc"], cnn["n"]))
    # the ceiling bounds a position-free classifier's AUROC too (spec's second metric): a constant
    # predictor sits at the class fraction in accuracy whatever it ranks, so both must stay below.
    # The burden is on the claim: failing is shown only when even + 2 s.e. stays at the ceiling
    # (not merely when the CNN is not shown above it).
    fails = (
        cnn["accuracy"] + 2 * cnn["se"] <= ceiling and cnn["auroc"] + 2 * cnn_auroc_se <= ceiling
    )
    note = (
        f"held when accuracy + 2 s.e. ({cnn['accuracy'] + 2 * cnn['se']:.3f}) and AUROC "
        f"({cnn['auroc']:.3f}) + 2 s.e. ({2 * cnn_auroc_se:.3f}; seed spread floored by Hanley and "
        f"McNeil) both stay at or below the ceiling ({ceiling:.3f})"
    )
    if not fails:
        note += "; not shown to fail: the CNN may reach the ceiling within noise"
    if cnn.get("constant"):
        note += "; the CNN is a constant predictor here (accuracy = class fraction)"
    if not learnable:
        note += "; vacuous: no model beats the ceiling, so failing it shows nothing"
    report.claim(
        "the CNN fails the long-range task (no better than the position-free ceiling)",
        "long-range accuracy",
        cnn["accuracy"],
        ceiling,
        direction="lower",
        baseline_name="position-free ceiling",
        held=fails and learnable,
        samples=_test_count(cnn),
        note=note,
    )


def median_ratio_se(row: dict[str, Any]) -> float:
    """Standard error of a median ratio from its quartiles (normal approximation: sigma = IQR / 1.349,
    s.e. of a median = 1.2533 sigma / sqrt(n))."""
    sigma = (row["ratio_q75"] - row["ratio_q25"]) / 1.349
    return 1.2533 * sigma / math.sqrt(row["repeats"])


def _claims_scaling(report: Report, settings: dict[str, Any]) -> list[dict[str, Any]]:
    short, long = settings["scaling_lengths"]
    rows, measured = [], {}
    for name in ("SPU", "Transformer"):
        row = report.cached(
            f"scaling-{name}-{short}-{long}",
            lambda n=name: time_scaling(
                n, short, long, settings["scaling_batch"], settings["scaling_repeats"]
            ),
            code=_training_code(),
        )
        measured[name] = (row["ratio"], median_ratio_se(row))
        rows.append({"model": name, f"L={short} s": row["baseline_s"], f"L={long} s": row["candidate_s"],
                     "time(2L)/time(L)": row["ratio"], "q25": row["ratio_q25"], "q75": row["ratio_q75"],
                     "pairs": row["repeats"]})  # fmt: skip
    attention, attention_se = measured["Transformer"]
    # the control: without it a ratio under the bound may be the timer's (noise, a shared CPU)
    timer_sees = attention - 2 * attention_se > QUASI_LINEAR
    ratio, se = measured["SPU"]
    note = (
        "forward + backward, one model timed at both lengths interleaved, median of per-pair "
        f"ratios; tolerance = 2 s.e. of that median ({2 * se:.3f}) from its quartiles"
    )
    if not timer_sees:
        note += (
            "; not tested: the timing control failed (attention's ratio is not above the bound by "
            "2 s.e.), so this timer has not shown it can tell quasi-linear from faster growth"
        )
    report.claim(
        f"SPU's time grows quasi-linearly (time(2L)/time(L) <= {QUASI_LINEAR} at L={short})",
        "time(2L)/time(L)",
        ratio,
        QUASI_LINEAR,
        direction="lower",
        baseline_name="quasi-linear bound",
        tolerance=2 * se,
        held=timer_sees and claim_holds(ratio, QUASI_LINEAR, "lower", 2 * se),
        samples=settings["scaling_repeats"],
        note=note,
    )
    report.claim(
        f"control: attention's time grows faster than quasi-linear (ratio > {QUASI_LINEAR} + 2 s.e.)",
        "time(2L)/time(L)",
        attention,
        QUASI_LINEAR,
        direction="higher",
        baseline_name="quasi-linear bound",
        held=timer_sees,
        samples=settings["scaling_repeats"],
        note="shows the timer can see super-linear growth (quadratic would be 4); "
        f"2 s.e. {2 * attention_se:.3f}",
    )
    return rows


def _figures(report: Report, results: dict[str, Any]) -> None:
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(8, 3.5))
    width = 0.8 / len(MODELS)
    for i, model in enumerate(MODELS):
        accs = [results[model][t]["accuracy"] for t in TASKS]
        ax.bar(np.arange(len(TASKS)) + i * width, accs, width, label=model)
    ax.axhline(0.5, color="grey", lw=0.8, ls=":")
    ax.set_xticks(np.arange(len(TASKS)) + 0.4 - width / 2, list(TASKS))
    ax.set_ylabel("test accuracy")
    ax.set_ylim(0.3, 1.0)
    ax.legend(fontsize=7, ncol=4)
    report.figure("accuracy", fig, "test accuracy per task and model")
    saliency, sites = results["SPU"]["motif"]["saliency"], results["SPU"]["motif"]["sites"]
    if saliency:
        fig, axes = plt.subplots(len(saliency), 1, figsize=(8, 1.2 * len(saliency)), sharex=True)
        for ax, alpha, site in zip(np.atleast_1d(axes), saliency, sites, strict=False):
            ax.plot(alpha, lw=0.8)
            ax.axvspan(site, site + 12, color="orange", alpha=0.3)
            ax.set_yticks([])
        np.atleast_1d(axes)[-1].set_xlabel("position (bp); orange: planted motif")
        report.figure(
            "saliency", fig, "SPU token saliency (last block) on positive motif sequences"
        )


def open_report(args: ReproduceArgs) -> tuple[Report, dict[str, Any]]:
    """The report of a run of ``args`` (its checkpoints under ``args.out``) and its settings."""
    import torch

    # one thread: small models on a shared CPU run faster without intra-op threading
    torch.set_num_threads(1)
    settings = _settings(args)
    report = Report(
        "spu-dna", "Synergistic Plasticity Unit (SPU) for DNA sequence modelling", args.out,
        {**settings, "seed": args.seed, "size": args.size},
    )  # fmt: skip
    return report, settings


def _val_by_lr(cell: dict[str, Any]) -> str:
    """The validation accuracy (first seed) at each lr of the grid, as ``a / b``."""
    return " / ".join(f"{v:.3f}" for v in cell.get("val_by_lr") or [])


def run(args: ReproduceArgs) -> Report:
    report, settings = open_report(args)
    results = _summary(_tune_and_train(report, settings, args.seed), settings, args.seed)
    _claims_accuracy(report, results)
    for ablation, task in ABLATION_CLAIMS.items():
        _claim_ablation(report, results, ablation, task)
    _claims_long_range(report, results)
    report.table(
        "test accuracy (mean over seeds ± 2 s.e.), AUROC, validation accuracy at each lr of the grid "
        "(first seed; the best is kept)",
        [{"model": m, "params": results[m]["motif"]["params"],
          **{f"{t} acc": f"{results[m][t]['accuracy']:.3f} ± {2 * results[m][t]['se']:.3f}"
             for t in TASKS},
          **{f"{t} AUROC": results[m][t]["auroc"] for t in TASKS},
          **{f"{t} val acc per lr": _val_by_lr(results[m][t]) for t in TASKS},
          "lr (per task)": "/".join(f"{results[m][t]['lr']:g}" for t in TASKS),
          "s/epoch": statistics.mean(results[m][t]["seconds"] for t in TASKS)} for m in MODELS],
    )  # fmt: skip
    report.table("forward + backward time", _claims_scaling(report, settings))
    _figures(report, results)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    return reproduce_main(run, argv, description=__doc__ or "")


if __name__ == "__main__":
    raise SystemExit(main())
