"""The cache of evaluated coalitions behind ``budget="evaluations"`` (shapiq's budget count).

shapiq charges its budget per *distinct* coalition: a coalition drawn twice is evaluated once. With
``budget="evaluations"`` adalina's estimators do the same: every draw still enters the estimate with
its own weight (a repeated draw is a repeated sample, so the estimator is unchanged), but its
utility comes from this cache. Keys are the bit-packed rows (``n/8`` bytes per coalition).
"""

from __future__ import annotations

import numpy as np


def coalition_keys(masks: np.ndarray) -> list[bytes]:
    """One hashable key per coalition row (its bit-packed membership)."""
    packed = np.packbits(masks, axis=1)
    return [row.tobytes() for row in packed]


class CoalitionCache:
    """Utilities of the coalitions evaluated so far, by :func:`coalition_keys`."""

    def __init__(self) -> None:
        self._values: dict[bytes, float] = {}

    def __len__(self) -> int:
        return len(self._values)

    def new_rows(self, keys: list[bytes]) -> np.ndarray:
        """Indices of the rows whose coalition is neither cached nor repeated earlier in ``keys``."""
        seen: set[bytes] = set()
        fresh = []
        for j, key in enumerate(keys):
            if key not in self._values and key not in seen:
                seen.add(key)
                fresh.append(j)
        return np.asarray(fresh, dtype=np.int64)

    def store(self, keys: list[bytes], values: np.ndarray) -> None:
        self._values.update(zip(keys, values.tolist(), strict=True))

    def lookup(self, keys: list[bytes]) -> np.ndarray:
        return np.fromiter((self._values[k] for k in keys), dtype=float, count=len(keys))
