"""The ``--quick`` report from the first seed only, read from an unfinished run's checkpoints.

    PYTHONPATH=... python packages/spu/docs/reproduce-quick/assemble_seed0.py OUT REPORT_DIR

Session 6 (2026-12-07) ran ``--quick`` (lr grid {1e-3, 3e-3}, 3 seeds) into ``OUT`` but the shared
machine finished only the lr-tuning step (seed 0, both lrs, every arm and task) before the deadline.
This reads those checkpoints under exactly the keys ``python -m spu_dna.reproduce --quick --out OUT``
would use (it trains nothing: a missing checkpoint raises), keeps each cell's lr chosen on validation,
and applies the package's claim rules to seed 0 alone (binomial standard errors, as with one seed).
The scaling rows are that run's checkpoints too.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from spu_dna import reproduce as rp
from spu_dna.experiments import MODELS, TASKS

from shared_core.cli import parse_reproduce_args
from shared_core.report import _core_source, _json_default, object_source_hash, package_version


def _load(report: Any, key: str) -> dict[str, Any]:
    identity = {
        "version": report.version,
        "code": object_source_hash(rp._training_code()),
        "core": [package_version("shared-core"), _core_source()],
        "settings": report.settings,
    }
    text = json.dumps([key, identity], sort_keys=True, default=_json_default)
    path = (
        report.out / "checkpoints" / f"{key}-{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
    )
    return json.loads(path.read_text())["result"]


def main(out: str, target: str) -> None:
    args = parse_reproduce_args(["--quick", "--out", out])
    report, settings = rp.open_report(args)
    runs, val = {}, {}
    for task in TASKS:
        for model in MODELS:
            name = model.replace(" ", "")
            tried = [_load(report, f"train-{task}-{name}-0-lr{lr:g}") for lr in settings["lr_grid"]]
            runs[model, task] = [max(tried, key=lambda r: r["val_accuracy"])]
            val[model, task] = " / ".join(f"{r['val_accuracy']:.3f}" for r in tried)
    results = rp._summary(runs)
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
    report.settings["reported"] = "seed 0 only: seeds 1-2 did not finish (assemble_seed0.py)"
    report.out = Path(target)  # the checkpoints stay under OUT; the report and figures go here
    report.out.mkdir(parents=True, exist_ok=True)
    rp._figures(report, results)
    print(report.write())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
