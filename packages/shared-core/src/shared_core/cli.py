"""The command line every ``python -m <package>.reproduce`` shares.

    python -m prism_matfn.reproduce [--out DIR] [--quick | --full | --smoke] [--seed N]

``--quick`` (the default) finishes in minutes on two CPU cores; ``--full`` runs the paper's scale where
the hardware exists; ``--smoke`` is the tiny size a test runs so the script cannot rot.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from shared_core.report import Report

Size = Literal["smoke", "quick", "full"]


@dataclasses.dataclass(frozen=True)
class ReproduceArgs:
    out: Path
    size: Size
    seed: int

    @property
    def quick(self) -> bool:
        return self.size == "quick"

    @property
    def full(self) -> bool:
        return self.size == "full"

    @property
    def smoke(self) -> bool:
        return self.size == "smoke"

    def pick(self, smoke: Any, quick: Any, full: Any) -> Any:
        """The value for this run's size: ``args.pick(smoke=2, quick=10, full=100)``."""
        return {"smoke": smoke, "quick": quick, "full": full}[self.size]


def parse_reproduce_args(
    argv: Sequence[str] | None = None, *, description: str = "", default_out: str = "reproduce-out"
) -> ReproduceArgs:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", type=Path, default=Path(default_out), help="output folder")
    size = parser.add_mutually_exclusive_group()
    size.add_argument(
        "--quick",
        dest="size",
        action="store_const",
        const="quick",
        help="CPU scale, a few minutes on 2 cores (default)",
    )
    size.add_argument(
        "--full",
        dest="size",
        action="store_const",
        const="full",
        help="the paper's scale, where a GPU or real weights exist",
    )
    size.add_argument(
        "--smoke", dest="size", action="store_const", const="smoke", help="a tiny run, for tests"
    )
    parser.add_argument("--seed", type=int, default=0)
    ns = parser.parse_args(argv)
    if ns.seed < 0:
        parser.error(f"--seed must be >= 0, got {ns.seed}")
    return ReproduceArgs(out=ns.out, size=ns.size or "quick", seed=ns.seed)


def progress(iterable: Iterable[Any] | None = None, **kwargs: Any) -> Any:
    """A tqdm progress bar on stderr (quiet when stderr is not a terminal, apart from the end)."""
    from tqdm.auto import tqdm

    kwargs.setdefault("mininterval", 1.0)
    kwargs.setdefault("dynamic_ncols", True)
    return tqdm(iterable, **kwargs)


def reproduce_main(
    run: Callable[[ReproduceArgs], Report],
    argv: Sequence[str] | None = None,
    *,
    description: str = "",
) -> int:
    """Parse the arguments, run ``run(args)``, write its report and print where it went.

    Claims that do not hold are results, not failures: the exit status is 0 whenever the run finished.
    """
    args = parse_reproduce_args(argv, description=description)
    report = run(args)
    path = report.write()
    held = sum(bool(c.held) for c in report.claims)
    print(
        f"{report.package}: {held}/{len(report.claims)} claims held; report in {path.parent}",
        file=sys.stderr,
    )
    return 0
