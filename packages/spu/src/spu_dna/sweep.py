"""Where a claim holds: one setting of the ``--quick`` reproduction varied, a few arms retrained.

    python -m spu_dna.sweep --axis length --values 64 128 256 --models SPU CNN [--out DIR] [--smoke]
        [--seeds N] [--lrs LR ...]

Issue 22: where a claim fails, vary the sequence length, the signal strength or the model size to find
where it holds, and report it honestly if nowhere. Each point of the sweep is the ``--quick`` protocol
(the same lr grid chosen on validation, the same seeds, the same claim rules of
:mod:`spu_dna.reproduce`) with one setting changed, on the arms named; the point equal to ``--quick``
reuses that run's checkpoints when ``--out`` is the same folder (the sweep's report goes to
``--out``/sweep-<axis>). ``--seeds`` and ``--lrs`` cut the protocol (fewer seeds, a smaller lr
grid) where the CPU budget demands it; the report records the cut. Axes:

- ``length``: the sequence length L (the long-range gap stays > L / 2; the periodic segment L/2-L bp).
- ``strength``: the motif PWM's consensus probability (:func:`~spu_dna.data.synthetic.random_pwm`;
  0.85 in ``--quick``), on the motif task only.
- ``size``: every arm's width times the value (:func:`~spu_dna.experiments.scaled_width`; 1 in
  ``--quick``), the depth kept; each arm's parameter count at each point is in the report.

Each point's claims are the reproduction's, on the arms and tasks swept: ``SPU >= <baseline>`` on
the mean over the tasks; with every task swept, ``removing X costs most on T`` for each ablation arm
swept (:data:`~spu_dna.reproduce.ABLATION_CLAIMS`); with the long-range task and the CNN swept, ``the
CNN fails the long-range task`` (its control: one of the swept arms learns the task).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from shared_core.cli import parse_reproduce_args
from shared_core.report import Report
from spu_dna.data.synthetic import random_pwm
from spu_dna.experiments import ABLATIONS, BASELINE_NAMES, MODELS, TASKS, WIDTH_SCALES
from spu_dna.reproduce import (
    ABLATION_CLAIMS,
    _claim_ablation,
    _claims_accuracy,
    _claims_long_range,
    _paired,
    _settings,
    _summary,
    _tune_and_train,
)

__all__ = ["AXES", "cut_note", "main", "point_settings", "sweep"]

AXES = ("length", "strength", "size")
# the longest L a sweep point accepts: --quick's protocol trains every arm at L for 192 steps on CPU,
# and attention's time and memory grow with L^2 (8192 is the reproduction's longest timing length)
MAX_LENGTH = 8192


def point_settings(base: dict[str, Any], axis: str, value: float) -> dict[str, Any]:
    """``base`` (the ``--quick`` settings) with ``axis`` set to ``value``."""
    settings = copy.deepcopy(base)
    if axis == "length":
        length = int(value)
        if length != value or not 32 <= length <= MAX_LENGTH:
            raise ValueError(f"length must be an integer in [32, {MAX_LENGTH}], got {value!r}")
        settings["length"] = length
        if length != base["length"]:  # --quick's own point keeps its settings (and checkpoints)
            settings["task_options"] = {"periodic": {"segment": (length // 2, length)}}
    elif axis == "strength":
        if np.array_equal(random_pwm(strength=float(value)), random_pwm()):
            return settings  # --quick's own PWM: its settings (and checkpoints)
        settings["task_options"] = {
            **settings["task_options"], "motif": {"pwm": random_pwm(strength=float(value))},
        }  # fmt: skip
    elif axis == "size":
        low, high = WIDTH_SCALES
        if not low <= value <= high:
            raise ValueError(f"size (a width scale) must be in [{low:g}, {high:g}], got {value!r}")
        if value != 1:  # --quick's own widths: its settings (and checkpoints)
            settings["width_scale"] = float(value)
    else:
        raise ValueError(f"axis must be one of {AXES}, got {axis!r}")
    return settings


def _point(
    out: Path, base: dict[str, Any], axis: str, value: float, tasks: Sequence[str],
    models: Sequence[str], seed: int, size: str,
) -> dict[str, Any]:  # fmt: skip
    """Train the arms at one point; its per-model summary and the accuracy claims' verdicts."""
    settings = point_settings(base, axis, value)
    if settings == base:
        report_settings = {**base, "seed": seed, "size": size}  # reproduce.open_report's
    else:
        report_settings = {**settings, "seed": seed, "size": size, "sweep": [axis, value]}
    report = Report("spu-dna", "sweep point", out, report_settings)
    runs = _tune_and_train(report, settings, seed, tasks=tasks, models=models)
    results = _summary(runs, settings, seed)
    scratch = Report("spu-dna", "claims at one point", out, report_settings)
    _claims_accuracy(scratch, results, [m for m in models if m in BASELINE_NAMES], tasks)
    if set(tasks) == set(TASKS):  # "costs most" compares the drops on every task
        for ablation, task in ABLATION_CLAIMS.items():
            if ablation in models:
                _claim_ablation(scratch, results, ablation, task)
    if "CNN" in models and "long_range" in tasks:
        _claims_long_range(scratch, results, models)
    return {"results": results, "claims": scratch.claims}


def _drop_rows(
    axis: str, value: float, results: dict[str, Any], tasks: Sequence[str], models: Sequence[str]
) -> list[dict[str, Any]]:
    """Each swept ablation's accuracy drop (full SPU - ablation, paired over seeds) per task."""
    rows = []
    for ablation in (m for m in models if m in ABLATIONS and m != "SPU"):
        drops = {t: _paired(results, "SPU", ablation, [t]) for t in tasks}
        rows.append({axis: value, "ablation": ablation,
                     **{f"{t} drop": f"{d:+.3f} ± {2 * se:.3f}" for t, (d, se) in drops.items()}})  # fmt: skip
    return rows


def cut_note(protocol: dict[str, Any], cuts: dict[str, Any], seed: int = 0) -> str:
    """What a cut sweep's verdicts rest on, against the protocol's ``seeds`` and ``lr_grid`` (each
    claim's note carries it, so that a verdict is never read as the full protocol's); "" uncut."""
    parts = []
    if "seeds" in cuts:
        seeds = ", ".join(str(seed + s) for s in range(cuts["seeds"]))
        parts.append(f"seeds {seeds} only (the protocol runs {protocol['seeds']})")
    if "lr_grid" in cuts:
        grid = ", ".join(f"{lr:g}" for lr in cuts["lr_grid"])
        full = ", ".join(f"{lr:g}" for lr in protocol["lr_grid"])
        parts.append(f"lr grid {{{grid}}} (the protocol chooses each arm's lr from {{{full}}} on "
                     "validation, so a fixed lr may not be an arm's own choice)")  # fmt: skip
    return f"protocol cut: {'; '.join(parts)}" if parts else ""


def sweep(
    out: Path, axis: str, values: Sequence[float], tasks: Sequence[str], models: Sequence[str],
    seed: int = 0, size: str = "quick", cuts: dict[str, Any] | None = None,
) -> Report:  # fmt: skip
    """The sweep's report: per point the arms' scores and the verdicts of the claims, a figure of
    accuracy against ``axis``. ``size="smoke"`` bases it on ``--smoke`` (for tests); ``cuts``
    overrides the protocol's ``seeds`` or ``lr_grid`` (recorded in the report's settings)."""
    cuts = cuts or {}
    protocol = _settings(parse_reproduce_args([f"--{size}"]))
    base = {**protocol, **cuts}
    cut = cut_note(protocol, cuts, seed)
    summary = Report("spu-dna", f"Where the claims hold: {axis} varied", out / f"sweep-{axis}",
                     {"axis": axis, "values": list(values), "tasks": list(tasks),
                      "models": list(models), "seed": seed, "base": f"--{size}",
                      "protocol cuts": cuts})  # fmt: skip
    # computed in the order given (put --quick's own point last to reuse its finished checkpoints),
    # reported in increasing order
    points = {value: _point(out, base, axis, value, tasks, models, seed, size) for value in values}
    values = sorted(values)
    rows, drops = [], []
    for value in values:
        results, claims = points[value]["results"], points[value]["claims"]
        drops += _drop_rows(axis, value, results, tasks, models)
        for model in models:
            rows.append({axis: value, "model": model, "params": results[model][tasks[0]]["params"],
                         **{f"{t} acc": f"{results[model][t]['accuracy']:.3f} ± "
                                        f"{2 * results[model][t]['se']:.3f}" for t in tasks},
                         **{f"{t} AUROC": results[model][t]["auroc"] for t in tasks},
                         "lr": "/".join(f"{results[model][t]['lr']:g}" for t in tasks)})  # fmt: skip
        for claim in claims:  # each point's verdicts, under the rules of the reproduction
            note = f"{claim.note}; {cut}" if claim.note and cut else claim.note or cut
            summary.claims.append(
                dataclasses.replace(claim, name=f"{axis} = {value:g}: {claim.name}", note=note)
            )
    summary.table("per point: test accuracy (mean over seeds ± 2 s.e.) and AUROC", rows)
    if drops:
        summary.table("per point: accuracy drop of each ablation (full SPU - ablation, paired over "
                      "seeds, ± 2 s.e.)", drops)  # fmt: skip
    _figure(summary, axis, values, points, tasks, models)
    return summary


def _figure(
    report: Report, axis: str, values: Sequence[float], points: dict[float, Any],
    tasks: Sequence[str], models: Sequence[str],
) -> None:  # fmt: skip
    from shared_core.report import subplots

    fig, axes = subplots(1, len(tasks), figsize=(3.6 * len(tasks), 3), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        for model in models:
            cells = [points[v]["results"][model][task] for v in values]
            ax.errorbar(values, [c["accuracy"] for c in cells],
                        yerr=[2 * c["se"] for c in cells], marker="o", capsize=3, label=model)  # fmt: skip
        ax.axhline(0.5, color="grey", lw=0.8, ls=":")
        ax.set_title(task)
        ax.set_xlabel("width scale" if axis == "size" else axis)
        if axis in ("length", "size"):
            ax.set_xscale("log", base=2)
    axes[0][0].set_ylabel("test accuracy (± 2 s.e.)")
    axes[0][-1].legend(fontsize=7)
    report.figure(f"sweep-{axis}", fig, f"test accuracy against {axis} (mean over seeds ± 2 s.e.)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--axis", choices=AXES, required=True)
    parser.add_argument("--values", type=float, nargs="+", required=True)
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS))
    parser.add_argument("--models", nargs="+", choices=MODELS, default=["SPU", "CNN"])
    parser.add_argument("--out", type=Path, default=Path("reproduce-out"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="base it on --smoke (for tests)")
    parser.add_argument("--seeds", type=int, help="a cut: seeds per cell (default the protocol's)")
    parser.add_argument(
        "--lrs", type=float, nargs="+", help="a cut: the lr grid (default the protocol's)"
    )
    args = parser.parse_args(argv)
    cuts: dict[str, Any] = {}
    if args.seeds is not None:
        if args.seeds < 1:
            parser.error(f"--seeds must be at least 1, got {args.seeds}")
        cuts["seeds"] = args.seeds
    if args.lrs is not None:
        if any(not (math.isfinite(lr) and lr > 0) for lr in args.lrs):
            parser.error(f"--lrs must be positive and finite, got {args.lrs}")
        cuts["lr_grid"] = args.lrs
    if "SPU" not in args.models or not set(args.models) & set(BASELINE_NAMES):
        parser.error(
            f"--models must hold SPU and at least one baseline of {list(BASELINE_NAMES)}, "
            f"got {args.models}"
        )
    if args.axis == "strength" and args.tasks != ["motif"]:
        parser.error("--axis strength varies the motif PWM: pass --tasks motif")
    if any(not math.isfinite(v) for v in args.values):
        parser.error(f"--values must be finite, got {args.values}")
    base = _settings(parse_reproduce_args(["--smoke" if args.smoke else "--quick"]))
    for value in args.values:  # every point checked before any is trained
        try:
            point_settings(base, args.axis, value)
        except ValueError as error:
            parser.error(f"--values {value:g}: {error}")
    import torch

    torch.set_num_threads(1)
    size = "smoke" if args.smoke else "quick"
    report = sweep(args.out, args.axis, args.values, args.tasks, args.models, args.seed, size, cuts)
    print(report.write())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
