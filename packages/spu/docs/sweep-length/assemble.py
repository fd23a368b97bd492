"""The length sweep's table and figure from an unfinished ``python -m spu_dna.sweep`` run's checkpoints.

    PYTHONPATH=... python packages/spu/docs/sweep-length/assemble.py OUT REPORT_DIR L [L ...]

Session 6 (2026-12-07) ran ``python -m spu_dna.sweep --axis length --values 64 256 128 --tasks
long_range --models SPU CNN Hyena --out OUT``; the shared machine did not let it finish. This reads
the checkpoints it (and ``--quick``, for L = 128) wrote under exactly the sweep's keys, trains nothing,
and reports per length and arm: each lr's validation accuracy on seed 0, the chosen lr's test
accuracy and AUROC on seed 0, and the three-seed mean (± 2 s.e., the package's rule) where all three
seeds finished. A point or seed that did not finish is reported as missing.

Needs mambapy installed (the checkpoints' settings record the Mamba scan) and ``OUT``, the
(gitignored) ``--out`` folder of the ``--quick`` run the sweep was pointed at, whose ``checkpoints/``
it reads.
"""

from __future__ import annotations

import statistics
import sys
from typing import Any

from spu_dna.reproduce import _se, _settings, _training_code, _var
from spu_dna.sweep import point_settings

from shared_core.cli import parse_reproduce_args
from shared_core.report import Report, subplots

MODELS = ("SPU", "CNN", "Hyena")


class Missing(Exception):
    """A checkpoint the sweep did not write (that point or seed did not finish)."""


def _raise(key: str) -> Any:
    raise Missing(key)


def _loader(out: str, settings: dict[str, Any]) -> Any:
    """Reads the sweep's checkpoints through the public ``Report.cached`` (same key, settings and
    code; its digest checked): a missing one raises :class:`Missing` instead of training."""
    report = Report("spu-dna", "sweep point", out, settings)

    def load(key: str) -> dict[str, Any] | None:
        try:
            result: dict[str, Any] = report.cached(key, lambda: _raise(key), code=_training_code())
        except Missing:
            return None  # reported as not finished
        return result

    return load


def _cell(load: Any, model: str, grid: list[float]) -> dict[str, Any]:
    tried = [load(f"train-long_range-{model}-0-lr{lr:g}") for lr in grid]
    row: dict[str, Any] = {
        "val acc per lr": " / ".join(
            "--" if r is None else f"{r['val_accuracy']:.3f}" for r in tried
        )
    }
    if any(r is None for r in tried):
        return row
    best = max(tried, key=lambda r: r["val_accuracy"])
    seeds = [best] + [load(f"train-long_range-{model}-{s}-lr{best['lr']:g}") for s in (1, 2)]
    row.update(lr=best["lr"], seed0_acc=best["accuracy"], seed0_auroc=best["auroc"])
    if all(seeds):
        accs = [r["accuracy"] for r in seeds]
        row["3-seed acc"] = statistics.mean(accs)
        # the package's rule: the seed spread, floored by the binomial s.e. (reproduce._se)
        row["2 s.e."] = 2 * _se(accs, [_var(a) for a in accs], best["n"])
    return row


def main(out: str, target: str, lengths: list[int]) -> None:
    base = _settings(parse_reproduce_args(["--quick"]))
    report = Report("spu-dna", "Where does it hold: long-range accuracy against L", target,
                    {"command": "python -m spu_dna.sweep --axis length --values 64 256 128 "
                     "--tasks long_range --models SPU CNN Hyena", "assembled": "assemble.py"})  # fmt: skip
    rows = []
    for length in lengths:
        settings = point_settings(base, "length", length)
        extra = {} if settings == base else {"sweep": ["length", float(length)]}
        load = _loader(out, {**settings, "seed": 0, "size": "quick", **extra})
        rows += [{"L": length, "model": m, **_cell(load, m, base["lr_grid"])} for m in MODELS]
    report.table("long-range task: seed 0 at each lr (validation), chosen lr on test", rows)
    fig, ax = subplots(figsize=(5, 3.2))
    for model in MODELS:
        points = [
            (r["L"], r["seed0_acc"]) for r in rows if r["model"] == model and "seed0_acc" in r
        ]
        ax.plot(*zip(*points, strict=True), marker="o", label=model)
    ax.axhline(0.5, color="grey", lw=0.8, ls=":")
    ax.axhline(2 / 3, color="grey", lw=0.8, ls="--", label="position-free ceiling")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length L (gap > L/2)")
    ax.set_ylabel("test accuracy (seed 0)")
    ax.legend(fontsize=7)
    report.figure("sweep-length", fig, "long-range test accuracy against L, seed 0, lr tuned")
    print(report.write())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], [int(v) for v in sys.argv[3:]])
