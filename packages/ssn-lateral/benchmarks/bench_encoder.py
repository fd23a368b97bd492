"""Encoding and fitting speed against scikit-learn, as ratios measured in one run.

    python benchmarks/bench_encoder.py [--patches 1000] [--units 64] [--repeats 5]

1. Encoding: ``SSNEncoder.transform`` (batched Euler steady state, per-row early stopping, float32)
   against ``SparseCoder(transform_algorithm="lasso_lars")`` with the same number of units, on the same
   whitened 8x8 patches, one thread each.
2. Fitting: ``SSNEncoder.fit`` against ``MiniBatchDictionaryLearning.fit`` on the same number of
   samples (``n_iter * batch_size`` for the SSN = one pass of the dictionary learner over the
   patches, both with mini-batches of 100).

Ratios below 1 mean the SSN is faster. Prints one line per comparison and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import warnings

import torch
from sklearn.decomposition import MiniBatchDictionaryLearning, SparseCoder
from ssn_lateral import RowSums, SSNEncoder, SSNParams, data, switching_rules

from shared_core.bench import compare


def encoder(n_units: int, n_iter: int) -> SSNEncoder:
    # the setting the reproduction selects (README, "settings searched")
    return SSNEncoder(
        n_units, rules=switching_rules(), n_iter=n_iter, batch_size=100, signed_input=True,
        input_gain=150.0, row_sums=RowSums(ee=0.0, ei=1.3), whiten=False,
        params=SSNParams(tol=1e-4, r_max=1e4), random_state=0,
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patches", type=int, default=1000)
    parser.add_argument("--units", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    X = data.natural_patches(args.patches, 8, images="textures", random_state=0)
    ssn = encoder(args.units, 20).fit(X)
    dico = MiniBatchDictionaryLearning(
        args.units, alpha=0.1, max_iter=1, batch_size=100, random_state=0
    ).fit(X)
    coder = SparseCoder(
        dico.components_, transform_algorithm="lasso_lars", transform_alpha=0.1, n_jobs=1
    )
    encode = compare(
        lambda: ssn.transform(X), lambda: coder.transform(X), name="SSNEncoder.transform",
        baseline_name="SparseCoder(lasso_lars).transform", repeats=args.repeats, warmup=1,
    )  # fmt: skip
    n_iter = args.patches // 100
    fit = compare(
        lambda: encoder(args.units, n_iter).fit(X),
        lambda: MiniBatchDictionaryLearning(args.units, alpha=0.1, max_iter=1, batch_size=100, random_state=0).fit(X),
        name=f"SSNEncoder.fit ({n_iter} x 100 samples)", baseline_name="MiniBatchDictionaryLearning.fit (1 epoch)",
        repeats=args.repeats, warmup=1,
    )  # fmt: skip
    for result in (encode, fit):
        print(result)
    rate = args.patches / encode.candidate_s
    print(json.dumps({"patches_per_s_ssn": rate, "patches_per_s_lasso_lars": args.patches / encode.baseline_s,
                      "encode": encode.as_row(), "fit": fit.as_row()}))  # fmt: skip


if __name__ == "__main__":
    main()
