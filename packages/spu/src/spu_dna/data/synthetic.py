"""The three generated tasks of spec section 5: local motif, long-range order and distance, periodicity.

Sequences are held as base codes ``0..3`` (``A C G T``) in a ``(n, length)`` uint8 array on an i.i.d.
background with GC content ``gc``; each task plants its signal and balances the two classes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import torch

__all__ = [
    "Task",
    "bag_of_motifs_ceiling",
    "encode_codes",
    "long_range_task",
    "motif_task",
    "periodic_task",
    "random_pwm",
]

_BASE_ID_OFFSET = 5  # DNATokenizer: A C G T are ids 5..8
LONG_RANGE_NEGATIVES = ("single", "reversed", "short")


@dataclasses.dataclass
class Task:
    """``codes``: ``(n, length)`` base codes 0..3; ``labels``: ``(n,)`` 0/1; ``sites``: where the
    signal was planted (the motif task's start positions), where a task records it."""

    name: str
    codes: np.ndarray
    labels: np.ndarray
    sites: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.labels)

    def sequences(self) -> list[str]:
        return ["".join("ACGT"[c] for c in row) for row in self.codes]

    def input_ids(self) -> torch.Tensor:
        """Token ids of :class:`~spu_dna.DNATokenizer` (every sequence has the same length)."""
        return torch.from_numpy(self.codes.astype(np.int64) + _BASE_ID_OFFSET)

    def split(self, n_train: int) -> tuple[Task, Task]:
        if not 0 < n_train < len(self):
            raise ValueError(f"n_train must lie in (0, {len(self)}), got {n_train}")
        sites = (None, None) if self.sites is None else (self.sites[:n_train], self.sites[n_train:])
        head = Task(self.name, self.codes[:n_train], self.labels[:n_train], sites[0])
        return head, Task(self.name, self.codes[n_train:], self.labels[n_train:], sites[1])


def encode_codes(sequences: Sequence[str]) -> np.ndarray:
    """Equal-length ``ACGT`` strings as a ``(n, length)`` code array (other characters raise)."""
    table = np.full(256, 255, dtype=np.uint8)
    for i, base in enumerate("ACGT"):
        table[ord(base)] = table[ord(base.lower())] = i
    codes = np.stack([table[np.frombuffer(s.encode(), dtype=np.uint8)] for s in sequences])
    if (codes == 255).any():
        bad = sorted({c for s in sequences for c in s.upper()} - set("ACGT"))
        raise ValueError(f"sequences hold characters outside ACGT: {bad}")
    return codes


def _background(rng: np.random.Generator, n: int, length: int, gc: float) -> np.ndarray:
    if not 0 < gc < 1:
        raise ValueError(f"gc must lie in (0, 1), got {gc}")
    p = [(1 - gc) / 2, gc / 2, gc / 2, (1 - gc) / 2]
    return rng.choice(4, size=(n, length), p=p).astype(np.uint8)


def random_pwm(width: int = 12, strength: float = 0.85, seed: int = 7) -> np.ndarray:
    """A ``(width, 4)`` probability matrix around a random consensus that uses the four bases equally
    often, ``strength`` on the consensus base and the rest spread evenly (a stand-in for JASPAR).

    A balanced consensus matters for the motif task: a column shuffle of an A/T-rich motif looks like
    the motif itself, which would make its negatives nearly indistinguishable from its positives.
    """
    if not 0.25 < strength <= 1:
        raise ValueError(f"strength must lie in (0.25, 1], got {strength}")
    rng = np.random.default_rng(seed)
    consensus = rng.permutation(np.resize(np.arange(4), width))
    pwm = np.full((width, 4), (1 - strength) / 3)
    pwm[np.arange(width), consensus] = strength
    return pwm


def _sample(rng: np.random.Generator, pwm: np.ndarray, n: int) -> np.ndarray:
    """``n`` instances ``(n, width)`` drawn from ``pwm`` column by column."""
    cdf = np.cumsum(pwm, axis=1)
    u = rng.random((n, len(pwm), 1))
    return np.minimum((u > cdf[None]).sum(axis=2), 3).astype(np.uint8)


def _check(n: int, length: int, need: int) -> None:
    if n < 2:
        raise ValueError(f"need n >= 2 sequences, got {n}")
    if length < need:
        raise ValueError(f"length {length} is too short for this task (needs >= {need})")


def _labels(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.permutation(np.arange(n) % 2)


def motif_task(
    n: int = 5000,
    length: int = 1024,
    pwm: np.ndarray | None = None,
    gc: float = 0.41,
    seed: int = 0,
) -> Task:
    """Positives hold one instance of ``pwm`` at a random position; negatives one instance of a
    column-shuffled ``pwm`` (the same base composition, another order). ``pwm`` defaults to
    :func:`random_pwm`; pass :func:`~spu_dna.data.jaspar_pwm` output for a real motif."""
    pwm = random_pwm() if pwm is None else np.asarray(pwm, dtype=float)
    width = len(pwm)
    _check(n, length, width)
    rng = np.random.default_rng([seed, 0])  # one stream per task: the three differ at one seed
    codes, labels = _background(rng, n, length, gc), _labels(rng, n)
    starts = rng.integers(0, length - width + 1, size=n)
    for i in range(n):
        matrix = pwm if labels[i] else pwm[_derangement(rng, width)]
        codes[i, starts[i] : starts[i] + width] = _sample(rng, matrix, 1)[0]
    return Task("motif", codes, labels, starts)


def _derangement(rng: np.random.Generator, width: int) -> np.ndarray:
    while True:  # a column order that moves every column (the identity would plant a positive)
        order = rng.permutation(width)
        if width == 1 or (order != np.arange(width)).all():
            return order


def bag_of_motifs_ceiling(negatives: Sequence[str] = LONG_RANGE_NEGATIVES) -> float:
    """The best accuracy on :func:`long_range_task` of a classifier that sees which motifs occur but
    not where: it can only reject the ``"single"`` negatives (half the data are positives)."""
    return 0.5 + 0.5 * sum(kind == "single" for kind in negatives) / len(negatives)


def long_range_task(
    n: int = 5000,
    length: int = 1024,
    min_gap: int | None = None,
    negatives: Sequence[str] = LONG_RANGE_NEGATIVES,
    gc: float = 0.41,
    seed: int = 0,
) -> Task:
    """Label 1 when motif A occurs before motif B more than ``min_gap`` (default ``length // 2``) bases
    downstream. Negatives, in equal shares of ``negatives``: ``"single"`` (A or B alone),
    ``"reversed"`` (B ... A at a long distance), ``"short"`` (A ... B closer than ``min_gap // 2``,
    farther than ``min_gap // 4``: beyond a small CNN's receptive field)."""
    bad = sorted(set(negatives) - set(LONG_RANGE_NEGATIVES))
    if bad or not negatives:
        raise ValueError(
            f"negatives must be drawn from {LONG_RANGE_NEGATIVES}, got {list(negatives)}"
        )
    motif_a, motif_b = random_pwm(8, 0.9, seed=11), random_pwm(8, 0.9, seed=13)
    width = len(motif_a)
    min_gap = length // 2 if min_gap is None else min_gap
    _check(n, length, min_gap + 2 * width)
    rng = np.random.default_rng([seed, 1])
    codes, labels = _background(rng, n, length, gc), _labels(rng, n)
    kinds = rng.choice(list(negatives), size=n)
    for i in range(n):
        kind = "positive" if labels[i] else kinds[i]
        if kind == "short":
            gap = int(rng.integers(max(width, min_gap // 4), max(width + 1, min_gap // 2)))
        else:
            gap = int(rng.integers(min_gap, length - width + 1))
        first = int(rng.integers(0, length - width - gap + 1))
        order = [motif_b, motif_a] if kind == "reversed" else [motif_a, motif_b]
        if kind == "single":
            order = [order[int(rng.integers(2))]]
        for pos, pwm in zip((first, first + gap), order, strict=False):
            codes[i, pos : pos + width] = _sample(rng, pwm, 1)[0]
    return Task("long_range", codes, labels)


def periodic_task(
    n: int = 5000,
    length: int = 1024,
    segment: tuple[int, int] | None = None,
    period: int = 10,
    jitter: int = 1,
    gc: float = 0.41,
    seed: int = 0,
) -> Task:
    """Positives hold AA/TT dinucleotides every ``period`` bases (+- ``jitter``) over a segment of
    ``segment`` bases (default 200-400 at length 1024, scaled with the length); negatives hold the same number of AA/TT at random, non-overlapping places in a
    segment of the same length (composition-matched, aperiodic)."""
    low, high = segment or (length * 200 // 1024, length * 400 // 1024)
    _check(n, length, high)
    if not 2 < period <= low // 2 or jitter < 0 or 2 * jitter + 2 > period:
        raise ValueError(f"need 2 < period <= {low // 2} and 0 <= jitter < period / 2 - 1")
    rng = np.random.default_rng([seed, 2])
    codes, labels = _background(rng, n, length, gc), _labels(rng, n)
    for i in range(n):
        size = int(rng.integers(low, high + 1))
        start = int(rng.integers(0, length - size + 1))
        count = size // period - 1
        if labels[i]:
            shifts = rng.integers(-jitter, jitter + 1, size=count)
            places = start + jitter + period * np.arange(count) + shifts
        else:
            slots = rng.choice((size - 1) // 2, size=count, replace=False)
            places = start + 2 * np.sort(slots)
        base = np.where(rng.random(count) < 0.5, 0, 3).astype(np.uint8)  # AA or TT
        codes[i, places] = base
        codes[i, places + 1] = base
    return Task("periodic", codes, labels)
