"""Which half of the SC-FC coupling can AFR-Net see? (diagnosis of issue 19's --quick failure)

Trains AFR-Net and the dual-stream GCN on the ``--quick`` cohort (Δ = 0.6, 200 subjects, 32-region
stand-in SCs, the same split and the same budget: batch 8, 6 epochs = 96 steps, lr 2e-3, init seeds
0-2) with the label replaced by one coin of the cohort: ``sc`` (the pathway's SC scaled by 1 + Δ:
a label in SC alone) or ``fc`` (its coupling in the FC model scaled: a label in FC alone); ``y``
keeps the coupling label of the reproduction, which needs both. ``--epochs`` lengthens the budget
(16 steps an epoch). Prints one JSON line per (label, model, seed).

``--models afrnet_bn`` adds a **spec-departing diagnostic variant**, never a default of the package:
AFR-Net with a BatchNorm over subjects on the pooled graph representation (before the head's
dropout), the across-subject normalisation the GCN has and AFR-Net lacks (issue 19 diagnosis).

    python benchmarks/marginal_labels.py --label sc   # --label fc; --label y --epochs 24
    python benchmarks/marginal_labels.py --label y --models afrnet afrnet_bn gcn
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from afrnet.baselines import DualStreamGNN, logistic_auc, upper_triangle
from afrnet.data import ConnectomeDataset, synthetic_cohort
from afrnet.model import AFRNet
from afrnet.training import TrainConfig, evaluate, fit, protocol_split, subset
from torch import nn

DATA_SEED = 20010920


def build(name: str) -> nn.Module:
    if name == "gcn":
        return DualStreamGNN(32, "gcn")
    model = AFRNet(32)
    if name == "afrnet_bn":  # departs from the spec: normalise the pooled representation
        head = model.prediction_head
        head.graph_repr_dropout = nn.Sequential(nn.BatchNorm1d(64), head.graph_repr_dropout)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--label", choices=("sc", "fc", "y"), required=True)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--epochs", type=int, default=6, help="16 steps each (6: the --quick budget)"
    )
    parser.add_argument(
        "--models", nargs="+", choices=("afrnet", "afrnet_bn", "gcn"), default=["afrnet", "gcn"]
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    cohort = synthetic_cohort(
        200, delta=0.6, density=0.2, base="geometric", num_nodes=32, seed=DATA_SEED
    )
    y = {"sc": cohort.structural, "fc": cohort.functional, "y": cohort.y}[args.label]
    data = ConnectomeDataset(cohort.sc, cohort.fc, y)
    split = protocol_split(y, seed=DATA_SEED)
    train, val, test = (subset(data, s) for s in (split.train, split.val, split.test))
    fitted = np.concatenate([split.train, split.val])
    for name, mats in (("fc_logreg", cohort.fc), ("sc_logreg", cohort.sc)):
        feats = upper_triangle(mats)
        auc = logistic_auc(feats[fitted], y[fitted], feats[split.test], y[split.test])
        print(json.dumps({"label": args.label, "model": name, "test_auc": round(auc, 3)}))
    for seed in range(args.seeds):
        for name in args.models:
            torch.manual_seed(seed)
            model = build(name)
            start = time.perf_counter()
            config = TrainConfig(epochs=args.epochs, batch_size=8, lr=2e-3, seed=seed)
            result = fit(model, train, val, config)
            row = {
                "label": args.label,
                "epochs": args.epochs,
                "model": name,
                "seed": seed,
                "test_auc": round(evaluate(model, test)["auc"], 3),
                "train_auc": round(evaluate(model, train)["auc"], 3),
                "last_loss": round(result.history[-1]["loss"], 4),
                "seconds": round(time.perf_counter() - start, 1),
            }
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
