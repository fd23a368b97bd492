"""SPU on the Genomic Benchmarks with the Caduceus fine-tuning protocol, from a local data cache.

    python packages/spu/benchmarks/genomic_benchmarks.py --data-dir ~/.genomic_benchmarks [--epochs 100]

Reads the layout genomic-benchmarks writes (``<dataset>/{train,test}/<class>/*.txt``, one sequence per
file) and downloads nothing: without the data it says where it looked and exits 0 (skipped). Protocol
(Caduceus ``genomic_benchmark.yaml``): AdamW lr 6e-4, weight decay 0.1, cosine with 1 % warm-up to
0.1 x, batch 128, grad clip 1.0, reverse-complement augmentation; accuracy on the test split.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
import torch
from spu_dna import DNATokenizer, SPUConfig, SPUForSequenceClassification
from spu_dna.training import Protocol, fit

DATASETS = (
    "dummy_mouse_enhancers_ensembl", "demo_coding_vs_intergenomic_seqs", "demo_human_or_worm",
    "human_enhancers_cohn", "human_enhancers_ensembl", "human_ensembl_regulatory",
    "human_nontata_promoters", "human_ocr_ensembl",
)  # fmt: skip


def read_split(folder: Path) -> tuple[list[str], np.ndarray]:
    classes = sorted(p.name for p in folder.iterdir() if p.is_dir())
    seqs, labels = [], []
    for label, name in enumerate(classes):
        for path in sorted((folder / name).glob("*.txt")):
            seqs.append(path.read_text().strip())
            labels.append(label)
    return seqs, np.array(labels)


def to_batch(tok: DNATokenizer, seqs: list[str], width: int) -> dict[str, torch.Tensor]:
    """Right-pad or cut every sequence to ``width`` (the Caduceus config pads to a fixed length)."""
    return tok.encode_batch([s[:width].ljust(width, "N") for s in seqs])


class _Padded:
    """A ``Task``-like view for :func:`spu_dna.training.fit` (ids already of equal width)."""

    def __init__(self, ids: torch.Tensor, labels: np.ndarray) -> None:
        self._ids, self.labels = ids, labels

    def input_ids(self) -> torch.Tensor:
        return self._ids


def run_dataset(root: Path, name: str, args: argparse.Namespace) -> dict[str, float]:
    tok = DNATokenizer(unknown="N")
    train_seqs, train_y = read_split(root / name / "train")
    test_seqs, test_y = read_split(root / name / "test")
    width = int(np.percentile([len(s) for s in train_seqs], 99))
    train_ids = to_batch(tok, train_seqs, width)["input_ids"]
    config = SPUConfig(d_model=args.d_model, n_layers=args.layers, dpl_max_len=width,
                       num_labels=int(train_y.max()) + 1, rc_equivariant=args.rc)  # fmt: skip
    torch.manual_seed(args.seed)
    model = SPUForSequenceClassification(config).to(args.device)
    protocol = Protocol(lr=args.lr, epochs=args.epochs, batch_size=128, rc_augment=True)
    fit(model, _Padded(train_ids, train_y), protocol, seed=args.seed)  # type: ignore[arg-type]
    test_ids = to_batch(tok, test_seqs, width)["input_ids"].to(args.device)
    with torch.no_grad():
        preds = torch.cat([model(input_ids=c).logits.argmax(-1).cpu() for c in test_ids.split(256)])
    return {
        "accuracy": float((preds.numpy() == test_y).mean()),
        "n_test": len(test_y),
        "width": width,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("GENOMIC_BENCHMARKS_DIR", str(Path.home() / ".genomic_benchmarks"))
    parser.add_argument("--data-dir", type=Path, default=Path(default))
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--lr", type=float, default=6e-4)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--rc", action="store_true", help="rc_equivariant=True (Caduceus-PH style)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    present = [d for d in args.datasets if (args.data_dir / d / "train").is_dir()]
    if not present:
        print(f"skipped: no Genomic Benchmarks data under {args.data_dir} (this script never "
              "downloads; set --data-dir or GENOMIC_BENCHMARKS_DIR)", file=sys.stderr)  # fmt: skip
        return 0
    results = {name: run_dataset(args.data_dir, name, args) for name in present}
    print(
        json.dumps(
            {"settings": {k: str(v) for k, v in vars(args).items()}, "results": results}, indent=2
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
