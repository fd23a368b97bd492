#!/usr/bin/env python3
"""Print ``packages=<json list>`` of the package folders a change touches, for the CI matrix.

``affected_packages.py BASE``: files changed between BASE and HEAD. A change to shared-core, the
noxfile, the constraints, the root pyproject or this script affects every package; so does an unknown
or all-zero BASE (a new branch).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EVERYTHING = ("packages/shared-core/", "noxfile.py", "shared/", "pyproject.toml", ".github/")


def affected(changed: list[str], folders: list[str]) -> list[str]:
    if any(path.startswith(EVERYTHING) for path in changed):
        return folders
    hit = {path.split("/")[1] for path in changed if path.startswith("packages/")}
    return [folder for folder in folders if folder in hit]


def main(argv: list[str]) -> int:
    folders = sorted(p.parent.name for p in ROOT.glob("packages/*/pyproject.toml"))
    base = argv[1] if len(argv) > 1 else ""
    diff = subprocess.run(
        ["git", "diff", "--name-only", f"{base}...HEAD"], capture_output=True, text=True, cwd=ROOT
    )
    if not base.strip("0") or diff.returncode != 0:
        result = folders
    else:
        result = affected(diff.stdout.split(), folders)
    print(f"packages={json.dumps(result)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
