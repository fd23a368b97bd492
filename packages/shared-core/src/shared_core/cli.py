"""The command line every ``python -m <package>.reproduce`` shares.

    python -m prism_matfn.reproduce [--out DIR] [--quick | --full | --smoke] [--seed N] [--fresh]

``--quick`` (the default) finishes in minutes on two CPU cores; ``--full`` runs the paper's scale where
the hardware exists; ``--smoke`` is the tiny size a test runs so the script cannot rot. ``--fresh``
recomputes every step a checkpoint of an earlier run would otherwise supply.

Before running, :func:`reproduce_main` checks that the distribution's ``reproduce`` extra is installed;
if it is not, it exits at once with the one line ``pip install '<dist>[reproduce]'``.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import re
import shutil
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
    fresh: bool = False

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
    argv: Sequence[str] | None = None,
    *,
    description: str = "",
    default_out: str = "reproduce-out",
    prog: str | None = None,
) -> ReproduceArgs:
    parser = argparse.ArgumentParser(
        prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(default_out),
        help=f"output folder for result.json, report.md and the figures (default: {default_out})",
    )
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
    parser.add_argument("--seed", type=int, default=0, help="base random seed (default: 0)")
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="recompute every step instead of reusing checkpoints of an earlier run in --out",
    )
    ns = parser.parse_args(argv)
    if ns.seed < 0:
        parser.error(f"--seed must be >= 0, got {ns.seed}")
    return ReproduceArgs(out=ns.out, size=ns.size or "quick", seed=ns.seed, fresh=ns.fresh)


_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*['"]([^'"]+)['"]""")


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def missing_requirements(dist: str, extra: str) -> list[str]:
    """The distributions ``dist[extra]`` needs that are not installed, following nested extras.

    Raises :class:`importlib.metadata.PackageNotFoundError` if ``dist`` itself is not installed.
    Reads the installed metadata (no ``packaging`` needed on a bare install); versions are not
    checked, only presence. A requirement whose ``sys_platform`` marker names another platform (triton
    on Linux, seen from macOS) is skipped.
    """
    importlib.metadata.requires(dist)  # PackageNotFoundError if dist itself is not installed
    missing: list[str] = []
    seen: set[tuple[str, str]] = set()
    todo = [(_normalise(dist), extra)]
    while todo:
        name, wanted = todo.pop()
        if (name, wanted) in seen:
            continue
        seen.add((name, wanted))
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
            continue
        for line in requires:
            requirement, _, marker = line.partition(";")
            extras = _EXTRA_MARKER.findall(marker)
            if wanted not in extras:
                continue
            if "sys_platform" in marker and sys.platform not in marker:
                continue
            match = _NAME.match(requirement)
            if match is None:
                continue
            dep = _normalise(match.group(1))
            nested = [e.strip() for e in (match.group(2) or "").split(",") if e.strip()]
            try:
                importlib.metadata.version(dep)
            except importlib.metadata.PackageNotFoundError:
                missing.append(dep)
                continue
            todo += [(dep, e) for e in nested]
    return sorted(set(missing))


def _module_of(run: Callable[..., Any]) -> str:
    module = run.__module__
    if module == "__main__":
        spec = getattr(sys.modules["__main__"], "__spec__", None)
        module = spec.name if spec is not None else module
    return module


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
    dist: str | None = None,
) -> int:
    """Parse the arguments, run ``run(args)``, write its report and print where it went.

    ``dist`` defaults to the top-level package of ``run``'s module with ``_`` read as ``-`` (the
    monorepo's naming rule). If its ``reproduce`` extra is not installed this exits with status 2
    and the one line ``pip install '<dist>[reproduce]'``, before any work; ``--help`` still works.
    A distribution that is not installed at all (a source tree on ``sys.path``) is not checked.
    ``--fresh`` deletes ``--out``'s checkpoints first.

    Claims that do not hold are results, not failures: the exit status is 0 whenever the run finished.
    """
    module = _module_of(run)
    top = module.partition(".")[0]
    dist = dist or top.replace("_", "-")
    args = parse_reproduce_args(argv, description=description, prog=f"python -m {module}")
    hint = f"pip install '{dist}[reproduce]'"
    try:
        missing = missing_requirements(dist, "reproduce")
    except importlib.metadata.PackageNotFoundError:
        missing = []
    if missing:
        print(hint, file=sys.stderr)
        return 2
    if args.fresh:
        shutil.rmtree(args.out / "checkpoints", ignore_errors=True)
    try:
        report = run(args)
    except ModuleNotFoundError as error:
        # A module the package imports lazily but forgot to declare is a packaging bug: say so.
        if error.name and error.name.partition(".")[0] != top:
            raise ModuleNotFoundError(
                f"{error}; {dist}'s reproduce extra should bring it ({hint})", name=error.name
            ) from error
        raise
    path = report.write()
    reused = f"; reused {len(report.reused)} cached results" if report.reused else ""
    print(f"{report.package}: {report.summary()}{reused}; report in {path.parent}", file=sys.stderr)
    return 0
