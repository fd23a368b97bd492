"""The ``--quick`` report from the first seed only, read from an unfinished run's checkpoints.

    PYTHONPATH=... python packages/spu/docs/reproduce-quick/assemble_seed0.py OUT REPORT_DIR

Session 6 (2026-12-07) ran ``--quick`` (lr grid {1e-3, 3e-3}, 3 seeds) into ``OUT`` but the shared
machine finished only the lr-tuning step (seed 0, both lrs, every arm and task) and seeds 1-2 of 10
of the 24 cells (none of the CNN, Transformer or Mamba) before the deadline.
This reads those checkpoints through ``Report.cached`` under exactly the keys
``python -m spu_dna.reproduce --quick --out OUT`` would use (it trains nothing: a missing or edited
checkpoint raises), keeps each cell's lr chosen on validation,
and applies the package's claim rules to seed 0 alone (binomial standard errors, as with one seed).
The scaling rows are that run's checkpoints too.

Needs mambapy installed (``--quick`` ran Mamba on its scan, which is in the checkpoints' settings) and
``OUT``, the (gitignored) ``--out`` folder of that ``--quick`` run, whose ``checkpoints/`` it reads.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NoReturn

from spu_dna import reproduce as rp
from spu_dna.experiments import MODELS, TASKS

from shared_core.cli import parse_reproduce_args
from shared_core.report import Report


def _missing(key: str) -> NoReturn:
    raise FileNotFoundError(
        f"no valid checkpoint {key!r} under the --quick out folder (trains nothing)"
    )


def load(report: Report, key: str) -> dict[str, Any]:
    """The checkpoint ``key`` of ``reproduce._tune_and_train``, through the public
    ``Report.cached`` (same key, settings and code, its digest checked); raises if missing."""
    result: dict[str, Any] = report.cached(key, lambda: _missing(key), code=rp._training_code())
    return result


def main(out: str, target: str) -> None:
    args = parse_reproduce_args(["--quick", "--out", out])
    report, settings = rp.open_report(args)
    runs, val = {}, {}
    for task in TASKS:
        for model in MODELS:
            name = model.replace(" ", "")
            tried = [load(report, f"train-{task}-{name}-0-lr{lr:g}") for lr in settings["lr_grid"]]
            runs[model, task] = [max(tried, key=lambda r: r["val_accuracy"])]
            val[model, task] = " / ".join(f"{r['val_accuracy']:.3f}" for r in tried)
    results = rp._summary(runs, settings, args.seed)
    rp._claims_accuracy(report, results)
    rp._claim_ablation(report, results, "SPU -DPL-freq", "periodic")
    rp._claim_ablation(report, results, "SPU -LPL", "motif")
    rp._claims_long_range(report, results)
    report.table(
        "test accuracy (seed 0 ± 2 binomial s.e.) and AUROC",
        [{"model": m, "params": results[m]["motif"]["params"],
          **{f"{t} acc": f"{results[m][t]['accuracy']:.3f} ± {2 * results[m][t]['se']:.3f}"
             for t in TASKS},
          **{f"{t} AUROC": results[m][t]["auroc"] for t in TASKS},
          **{f"{t} val acc at lr {' / '.join(map(str, settings['lr_grid']))}": val[m, t]
             for t in TASKS},
          "lr (per task)": "/".join(f"{results[m][t]['lr']:g}" for t in TASKS),
          "s/epoch": sum(results[m][t]["seconds"] for t in TASKS) / len(TASKS)} for m in MODELS],
    )  # fmt: skip
    report.table("forward + backward time", rp._claims_scaling(report, settings))
    report.settings["reported"] = (
        "seed 0 only (assemble_seed0.py): seeds 1-2 at the chosen lr finished for 10 of 24 cells "
        "(motif: SPU, SPU -DPL-freq, Hyena; long_range: SPU, SPU -SPL, Hyena; periodic: SPU, "
        "SPU -DPL-freq, SPU -SPL, Hyena), not for the other baselines, so the claims use seed 0 "
        "for every arm alike and carry no seed-to-seed term"
    )
    report.out = Path(target)  # the checkpoints stay under OUT; the report and figures go here
    report.out.mkdir(parents=True, exist_ok=True)
    rp._figures(report, results)
    print(report.write())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
