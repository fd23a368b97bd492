"""On-disk cache shared by every package: where it lives, recipe keys, and atomic writes."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

CACHE_ENV_VAR = "ADAPTIVE_METHODS_CACHE"


def cache_dir(*parts: str) -> Path:
    """Return (and create) a directory inside the project cache.

    The root is ``$ADAPTIVE_METHODS_CACHE`` when set, otherwise
    ``$XDG_CACHE_HOME/adaptive-methods`` (``~/.cache/adaptive-methods`` when
    ``XDG_CACHE_HOME`` is unset). ``parts`` are joined below the root.
    """
    env_root = os.environ.get(CACHE_ENV_VAR)
    if env_root:
        root = Path(env_root).expanduser()
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
        root = base / "adaptive-methods"
    for part in parts:
        # A part that climbs out of the cache (absolute or "..") would write elsewhere on disk.
        if Path(part).is_absolute() or ".." in Path(part).parts:
            raise ValueError(
                f"cache path part must be relative and stay inside the cache: {part!r}"
            )
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def recipe_hash(recipe: Mapping[str, Any], length: int = 16) -> str:
    """Stable hex digest of a JSON-serialisable recipe (key order does not matter)."""
    blob = json.dumps(recipe, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:length]


@contextlib.contextmanager
def atomic_directory(target: Path) -> Iterator[Path]:
    """Yield a fresh temporary directory that becomes ``target`` when the block succeeds.

    The temporary directory sits next to ``target`` (same filesystem), so the final
    ``os.rename`` is atomic: an interrupted run leaves only a hidden ``.tmp-*`` folder,
    never a half-written ``target``. If another process created ``target`` meanwhile,
    its copy wins and ours is discarded.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        yield tmp
        try:
            os.rename(tmp, target)
        except OSError:
            if not target.is_dir():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
