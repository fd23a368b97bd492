"""PPAI on your own logged experiment: labeled-only IPW, PPAI (tuned λ) and PPI++ ignoring adaptivity.

    python packages/ppai/benchmarks/ppai_realdata.py experiment.npz --arm 1 [--control 0] [--problem mean]

``experiment.npz`` holds ``Y`` (T,), ``A`` (T,), ``propensity`` ((T,) or (T, K), logged by the policy),
``pred_labeled`` ((T,) or (T, K)) and ``pred_unlabeled`` ((N, K)) from the pretrained model, and for
regressions ``X`` (T, p) and ``X_unlabeled`` (N, p). With ``--control`` the target is the effect
``μ_arm − μ_control``. Not run in CI: the paper's real data and model are not public.
"""

from __future__ import annotations

import argparse

import numpy as np
import ppai


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("path")
    parser.add_argument("--arm", type=int, required=True)
    parser.add_argument("--control", type=int, default=None)
    parser.add_argument(
        "--problem", default="mean", choices=["mean", "ols", "logistic", "quantile"]
    )
    parser.add_argument("--alpha", type=float, default=0.05)
    args = parser.parse_args()
    data = np.load(args.path)
    arrays = [
        data.get("X"),
        data["A"],
        data["Y"],
        data["propensity"],
        data["pred_labeled"],
        data.get("X_unlabeled"),
        data["pred_unlabeled"],
    ]
    arms = args.arm if args.control is None else [args.arm, args.control]
    for name, kw in (
        ("labeled-only IPW", {"lam": 0.0}),
        ("PPAI tuned λ", {}),
        ("PPI++ ignoring adaptivity", {"weighting": "none"}),
    ):
        if args.control is not None and kw.get("weighting") == "none":
            continue  # the naive baseline estimates one arm at a time
        fit = ppai.PPAI(args.problem, target_arm=arms, alpha=args.alpha, **kw).fit(*arrays)
        if args.control is None:
            print(f"{name}: θ̂ = {fit.theta_}, CI = {fit.conf_int().tolist()}, λ = {fit.lam_}")
        else:
            print(f"{name}: effect = {fit.contrast([1.0, -1.0])}, λ = {fit.lam_}")


if __name__ == "__main__":
    main()
