"""A real text corpus available on every machine: the Python standard library's own source."""

from __future__ import annotations

import functools
import random
import sysconfig
from pathlib import Path
from typing import Any, Protocol, TypeVar

from shared_core.data.registry import register_loader

# Folders left out: test suites are huge and repetitive, idlelib is an application,
# site-packages holds third-party code that differs between environments.
_SKIPPED_DIRS = frozenset({"test", "tests", "idlelib", "site-packages", "__pycache__"})
_SEPARATOR = "\n\n"


class _Sliceable(Protocol):
    def __len__(self) -> int: ...
    def __getitem__(self, index: slice, /) -> Any: ...


Seq = TypeVar("Seq", bound=_Sliceable)


def stdlib_root() -> Path:
    """Directory of the running interpreter's standard library."""
    return Path(sysconfig.get_paths()["stdlib"])


@functools.lru_cache(maxsize=1)
def stdlib_source_files() -> tuple[Path, ...]:
    """Sorted ``.py`` files of the standard library, without tests, idlelib and site-packages."""
    root = stdlib_root()
    if not root.is_dir():
        raise FileNotFoundError(f"standard library directory not found: {root}")
    files = [
        path
        for path in root.rglob("*.py")
        if not _SKIPPED_DIRS.intersection(path.relative_to(root).parts[:-1])
    ]
    # Sort by the relative POSIX path so the order does not depend on the filesystem.
    return tuple(sorted(files, key=lambda p: p.relative_to(root).as_posix()))


@register_loader("stdlib_corpus")
@functools.lru_cache(maxsize=4)
def stdlib_corpus(max_bytes: int = 1_000_000, seed: int = 0) -> str:
    """Concatenated standard-library source, shuffled by file with ``seed``, cut at ``max_bytes``.

    Files are listed in sorted order, shuffled with ``random.Random(seed)``, joined with
    blank lines, and the UTF-8 encoding is truncated to at most ``max_bytes`` bytes (never
    inside a character). If the library is smaller, the whole of it is returned.

    Determinism is per interpreter: the same Python version and install give the same
    text for the same ``(max_bytes, seed)``, but another Python version ships other
    standard-library files, hence another corpus. Key caches on ``sys.version_info``.
    """
    if not isinstance(max_bytes, int) or max_bytes <= 0:
        raise ValueError(f"max_bytes must be a positive int, got {max_bytes!r}")
    files = list(stdlib_source_files())
    random.Random(seed).shuffle(files)
    chunks: list[bytes] = []
    size = 0
    for path in files:
        # Decode leniently: a handful of stdlib files are not valid UTF-8, and the corpus
        # only needs to be the same text every time.
        text = path.read_text(encoding="utf-8", errors="replace")
        chunk = (text + _SEPARATOR).encode("utf-8")
        chunks.append(chunk)
        size += len(chunk)
        if size >= max_bytes:
            break
    return b"".join(chunks)[:max_bytes].decode("utf-8", errors="ignore")


def train_val_split(data: Seq, val_fraction: float = 0.1) -> tuple[Seq, Seq]:
    """Split a sliceable sequence (str, list, 1-D tensor, ...) into ``(train, validation)``.

    The split is contiguous: validation is the last ``val_fraction`` of ``data``, so
    nothing leaks across the boundary by shuffling and the result is deterministic.
    """
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction!r}")
    n = len(data)
    cut = n - max(1, round(n * val_fraction))
    if cut <= 0:
        raise ValueError(f"sequence of length {n} is too short to split with {val_fraction=}")
    return data[:cut], data[cut:]
