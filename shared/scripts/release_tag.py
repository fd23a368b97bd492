#!/usr/bin/env python3
"""Resolve a release tag ``<distribution>-v<version>`` to its package, or fail.

Prints ``folder=…``, ``dist=…``, ``import=…`` and ``version=…`` lines (for ``$GITHUB_OUTPUT``) when
the tag names a package whose ``pyproject.toml`` carries exactly that version.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
TAG = re.compile(r"^(?P<dist>[a-z0-9][a-z0-9-]*)-v(?P<version>\d+\.\d+\.\d+\S*)$")


def resolve(tag: str) -> dict[str, str]:
    match = TAG.match(tag)
    if not match:
        raise SystemExit(f"tag {tag!r} is not of the form <distribution>-v<version>")
    for pyproject in sorted(ROOT.glob("packages/*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text())["project"]
        if project["name"] == match["dist"]:
            if project["version"] != match["version"]:
                raise SystemExit(
                    f"tag {tag!r} says version {match['version']}, but "
                    f"{pyproject.relative_to(ROOT)} has {project['version']}"
                )
            return {
                "folder": pyproject.parent.name,
                "dist": project["name"],
                "import": project["name"].replace("-", "_"),
                "version": project["version"],
            }
    raise SystemExit(f"tag {tag!r} names no package under packages/")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: release_tag.py <distribution>-v<version>")
    for key, value in resolve(sys.argv[1]).items():
        print(f"{key}={value}")
