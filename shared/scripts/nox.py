#!/usr/bin/env python3
"""Run nox with nothing installed but Python 3.10+: ``python3 shared/scripts/nox.py -t ci``.

Creates ``.nox/_tools`` (a venv holding nox and uv) on first use, then runs nox from it with the
arguments given. Everything else (torch, the packages, test tools) nox installs per session.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / ".nox" / "_tools"
REQUIREMENTS = ["nox>=2025.2.9", "uv>=0.5", "tomli; python_version < '3.11'"]


def main() -> int:
    if sys.version_info < (3, 10):  # noqa: UP036 - this script may meet an older interpreter
        sys.exit(f"Python 3.10 or newer is needed, this is {sys.version.split()[0]}")
    bindir = TOOLS / ("Scripts" if os.name == "nt" else "bin")
    if not (bindir / "nox").exists():
        venv.create(TOOLS, with_pip=True, clear=True)
        subprocess.run(
            [
                str(bindir / "python"),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                *REQUIREMENTS,
            ],
            check=True,
        )
    env = dict(os.environ, PATH=os.pathsep.join([str(bindir), os.environ.get("PATH", "")]))
    return subprocess.run(
        [str(bindir / "nox"), *sys.argv[1:]], cwd=ROOT, env=env, check=False
    ).returncode


if __name__ == "__main__":
    raise SystemExit(main())
