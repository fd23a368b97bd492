"""Reproduce the paper's claims at CPU scale: ``python -m spu_dna.reproduce [--quick|--full]``."""

from __future__ import annotations

from collections.abc import Sequence

from shared_core.cli import ReproduceArgs, reproduce_main
from shared_core.report import Report


def run(args: ReproduceArgs) -> Report:
    # Import what the `reproduce` extra brings (matplotlib, scikit-learn ...) here, inside run:
    # reproduce_main names the extra in one line when it is missing.
    report = Report("spu-dna", "TODO: the paper's title", args.out, {"size": args.size, "seed": args.seed})
    return report


def main(argv: Sequence[str] | None = None) -> int:
    return reproduce_main(run, argv, description=__doc__ or "")


if __name__ == "__main__":
    raise SystemExit(main())
