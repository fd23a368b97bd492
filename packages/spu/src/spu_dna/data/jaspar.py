"""Position weight matrices read from the JASPAR SQLite files that the ``pyjaspar`` wheel ships.

The tables are read directly (``MATRIX`` and ``MATRIX_DATA``): no network, no Biopython objects.
"""

from __future__ import annotations

import importlib.util
import sqlite3
from pathlib import Path

import numpy as np

__all__ = ["jaspar_pwm"]


def _database(release: str) -> Path:
    spec = importlib.util.find_spec("pyjaspar")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(
            "JASPAR matrices come from the pyjaspar wheel: pip install 'spu-dna[pyjaspar]'",
            name="pyjaspar",
        )
    path = Path(spec.origin).parent / "data" / f"{release}.sqlite"
    if not path.exists():
        have = sorted(p.stem for p in path.parent.glob("JASPAR*.sqlite"))
        raise ValueError(f"release {release!r} is not in the installed pyjaspar; it ships {have}")
    return path


def jaspar_pwm(
    matrix_id: str = "MA0139.1", release: str = "JASPAR2024", pseudocount: float = 0.5
) -> np.ndarray:
    """The probability matrix ``(width, 4)`` (columns A C G T) of JASPAR ``matrix_id`` (e.g. CTCF
    ``"MA0139.1"``), from counts plus ``pseudocount`` per cell."""
    base, _, version = matrix_id.partition(".")
    if not version.isdigit():
        raise ValueError(f"matrix_id must look like 'MA0139.1', got {matrix_id!r}")
    with sqlite3.connect(f"file:{_database(release)}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT d.row, d.col, d.val FROM MATRIX m JOIN MATRIX_DATA d ON d.ID = m.ID "
            "WHERE m.BASE_ID = ? AND m.VERSION = ?",
            (base, int(version)),
        ).fetchall()
    if not rows:
        raise ValueError(f"{matrix_id} is not in {release}")
    width = max(col for _, col, _ in rows)
    counts = np.zeros((width, 4))
    for row, col, val in rows:
        counts[col - 1, "ACGT".index(row.upper())] = val
    counts += pseudocount
    return counts / counts.sum(axis=1, keepdims=True)
