"""The paper's 5-seed protocol on the official (restricted) pickles; not run here (no data).

    python benchmarks/run_abcd.py abcd.pkl [--format abcd|ppmi] [--epochs 50] [--seeds 0 1 2 3 4]
    python benchmarks/run_abcd.py ppmi_train.pkl --format ppmi --test ppmi_test.pkl

ABCD: ``{id: {"SC", "FC", "label", "name"}}``, preprocessed as the paper (log-min-max SC, top-30 % FC),
balanced 1:1, stratified test 30 %, validation 10 % of train, data seed 20010920. PPMI: the
pre-split ``{"scn", "fcn", "labels"}`` pickles, raw matrices, validation 10 % of train. Prints the
test accuracy, precision, recall, F1 and AUC per seed and as mean ± std (ddof = 1), for AFR-Net and
the m ≡ 1 ablation. A GPU only speeds it up (``--device cuda``).
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch
from afrnet.data import ConnectomeDataset, load_abcd_pickle, load_ppmi_pickle
from afrnet.model import AFRNet
from afrnet.training import Split, TrainConfig, protocol_split, run_seeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data")
    parser.add_argument("--format", choices=["abcd", "ppmi"], default="abcd")
    parser.add_argument("--test", help="PPMI: the test split pickle")
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    if args.format == "abcd":
        sc, fc, y, _ = load_abcd_pickle(args.data)
        data = ConnectomeDataset(sc, fc, y)
        split = protocol_split(y)
    else:
        from sklearn.model_selection import train_test_split

        if args.test is None:
            parser.error("--format ppmi needs --test")
        sc_tr, fc_tr, y_tr = load_ppmi_pickle(args.data)
        sc_te, fc_te, y_te = load_ppmi_pickle(args.test)
        data = ConnectomeDataset(np.concatenate([sc_tr, sc_te]), np.concatenate([fc_tr, fc_te]),
                                 np.concatenate([y_tr, y_te]))  # fmt: skip
        tr, va = train_test_split(
            np.arange(len(y_tr)), test_size=0.1, stratify=y_tr, random_state=42
        )
        split = Split(np.sort(tr), np.sort(va), np.arange(len(y_tr), len(y_tr) + len(y_te)))
    n = data.num_nodes
    config = TrainConfig(epochs=args.epochs)
    out = {}
    for name, routing in (("afrnet", True), ("ablation", False)):

        def build(seed: int, routing: bool = routing) -> AFRNet:
            torch.manual_seed(seed)
            return AFRNet(n, routing=routing).to(args.device)

        res = run_seeds(build, data, split, args.seeds, config)
        out[name] = {"per_seed": res["per_seed"], "mean_std": res["mean_std"]}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
