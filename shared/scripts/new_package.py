#!/usr/bin/env python3
"""Create a method package from the template: ``python shared/scripts/new_package.py FOLDER DIST``.

Writes ``packages/FOLDER`` with the skeleton every package shares (hatchling pyproject with a static
version, ``src/<import>/``, ``tests/``, ``benchmarks/``, README with Reproduction and Deviations
sections, CHANGELOG.md and ``changelog.d/``) from ``shared/templates/package``. Refuses to overwrite.
"""

from __future__ import annotations

import argparse
import re
import string
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "shared" / "templates" / "package"
DIST_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


def core_range() -> str:
    text = (ROOT / "packages" / "shared-core" / "pyproject.toml").read_text()
    major, minor, _ = re.search(r'^version = "(\d+)\.(\d+)\.(\d+)"', text, re.M).groups()
    upper = f"{int(major) + 1}.0" if int(major) else f"0.{int(minor) + 1}"
    return f">={major}.{minor},<{upper}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="folder under packages/, e.g. prism")
    parser.add_argument("dist", help="distribution name, e.g. prism-matfn")
    args = parser.parse_args(argv)
    if not DIST_RE.match(args.dist):
        parser.error(f"distribution name {args.dist!r} must be lowercase words joined by '-'")
    dest = ROOT / "packages" / args.folder
    if dest.exists():
        parser.error(f"{dest} already exists")
    values = {
        "folder": args.folder,
        "dist": args.dist,
        "import_name": args.dist.replace("-", "_"),
        "core_range": core_range(),
    }
    for src in sorted(TEMPLATE.rglob("*")):
        if src.is_dir():
            continue
        rel = Path(string.Template(str(src.relative_to(TEMPLATE))).substitute(values))
        target = dest / rel.with_suffix("") if rel.suffix == ".tmpl" else dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(string.Template(src.read_text()).substitute(values))
    print(
        f"created {dest.relative_to(ROOT)}; add it to the names table in README.md", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
