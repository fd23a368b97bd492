"""Benchmark: the grounded flow energy against the official double solve, and training throughput.

    python benchmarks/bench_energy.py [--sizes 90 200 400] [--batches 64 8 2] [--repeats 5]

1. ``flow_energy(solver="pinv")`` (one batched call) against the official ``dial/routing.py``
   formulation (a per-subject loop: incidence matrix, two ``torch.linalg.solve`` with E right-hand
   sides), dense SC, float32 as the official code, same inputs; also our batched ``solver="solve"``
   (float64: the double solve refuses float32).
   The official cost grows as N²E = O(N⁴) on dense SC, so the batch shrinks with N (the ratio is per
   subject either way).
2. Training subjects per second: one optimisation step (batch 32, N = 94, 10 % density) of AFR-Net
   against the dual-stream GCN (dense; torch-geometric's too when installed).
Ratios come from ``shared_core.bench.compare`` (interleaved, median of per-pair ratios).
"""

from __future__ import annotations

import argparse
import contextlib
import json

import numpy as np
import torch
from afrnet.baselines import DualStreamGNN
from afrnet.data import ConnectomeDataset, synthetic_cohort
from afrnet.functional import flow_energy, sc_edges, task_laplacian
from afrnet.model import AFRNet
from afrnet.training import TrainConfig, make_optimizer, train_step

from shared_core.bench import compare


def _safe_solve(mat: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    """The official fallback: LU solve, least squares when LU reports L + δI singular (mirrored
    for fidelity; on dense SC at N = 90 in float32 it was taken in 0 of 8 solves)."""
    try:
        return torch.linalg.solve(mat, rhs)
    except RuntimeError:
        return torch.linalg.lstsq(mat, rhs).solution


def official_energy(
    sc: torch.Tensor, fc: torch.Tensor, g: torch.Tensor, delta: float = 1e-6
) -> torch.Tensor:
    """``compute_edge_energy`` of the official code for one subject (its incidence matrix and two
    solves), given the conductances."""
    n = sc.shape[0]
    edges = sc_edges(sc)
    inc = torch.zeros(edges.shape[1], n, dtype=sc.dtype)
    idx = torch.arange(edges.shape[1])
    inc[idx, edges[0]] = 1.0
    inc[idx, edges[1]] = -1.0
    lap = inc.T @ torch.diag(g) @ inc + delta * torch.eye(n, dtype=sc.dtype)
    x = _safe_solve(lap, inc.T)
    z = _safe_solve(lap, task_laplacian(fc) @ x)
    return 100.0 * 2.0 * g * (inc * z.T).sum(1)


def energy_case(n: int, batch: int, repeats: int) -> dict[str, float]:
    rng = np.random.default_rng(n)
    a = rng.uniform(0.1, 1.0, size=(batch, n, n))
    sc = torch.tensor(np.triu(a, 1) + np.swapaxes(np.triu(a, 1), 1, 2), dtype=torch.float32)
    x = rng.standard_normal((batch, 3 * n, n))
    fc = torch.tensor(np.stack([np.corrcoef(s.T) for s in x]), dtype=torch.float32)
    e = sc_edges(sc[0])
    g = torch.tensor(rng.uniform(0.5, 2.0, size=(batch, e.shape[1])), dtype=torch.float32)
    dense = torch.zeros_like(sc)
    dense[:, e[0], e[1]] = g
    dense = dense + dense.transpose(1, 2)

    def official() -> None:
        for b in range(batch):
            official_energy(sc[b], fc[b], g[b])

    ours = compare(lambda: flow_energy(sc, fc, dense, solver="pinv"), official,
                   name="pinv", baseline_name="official", repeats=repeats, warmup=1)  # fmt: skip
    sc64, fc64, dense64 = sc.double(), fc.double(), dense.double()  # "solve" is float64-only
    solve = compare(lambda: flow_energy(sc64, fc64, dense64, solver="solve"), official,
                    name="batched solve", baseline_name="official", repeats=repeats, warmup=1)  # fmt: skip
    ref = official_energy(sc[0].double(), fc[0].double(), g[0].double())
    official32 = official_energy(sc[0], fc[0], g[0]).double()
    got = flow_energy(sc[:1], fc[:1], dense[:1], solver="pinv")[0][e[0], e[1]].double()
    return {
        "N": n, "batch": batch, "E": int(e.shape[1]),
        "pinv_speedup": 1 / ours.ratio, "pinv_ms": ours.candidate_s * 1e3, "official_ms": ours.baseline_s * 1e3,
        "batched_solve_speedup": 1 / solve.ratio,
        "float32_pinv_rel_err": float((got - ref).abs().max() / ref.abs().max()),
        "float32_official_rel_err": float((official32 - ref).abs().max() / ref.abs().max()),
    }  # fmt: skip


def training_case(repeats: int) -> list[dict[str, float]]:
    cohort = synthetic_cohort(32, density=0.1, base="geometric", timepoints=300, seed=0)
    data = ConnectomeDataset(cohort.sc, cohort.fc, cohort.y)
    batch = data.batch(range(32))
    n = data.num_nodes
    config = TrainConfig()
    models = {"afrnet": AFRNet(n), "gcn_dense": DualStreamGNN(n, "gcn")}
    with contextlib.suppress(ImportError):
        models["gcn_pyg"] = DualStreamGNN(n, "gcn", backend="pyg")
    steps = {}
    for name, model in models.items():
        opt, _ = make_optimizer(model, config)
        steps[name] = lambda model=model, opt=opt: train_step(model, opt, batch, 1.0)
    rows = []
    for name in models:
        if name == "afrnet":
            continue
        c = compare(
            steps["afrnet"],
            steps[name],
            name="afrnet",
            baseline_name=name,
            repeats=repeats,
            warmup=1,
        )
        rows.append({
            "baseline": name, "afrnet_subjects_per_s": 32 / c.candidate_s,
            "baseline_subjects_per_s": 32 / c.baseline_s, "afrnet_time_ratio": c.ratio,
        })  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[90, 200, 400])
    parser.add_argument("--batches", type=int, nargs="+", default=[64, 8, 2])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    # one JSON line per case as it finishes: the large official solves take minutes on a busy CPU
    for row in training_case(args.repeats):
        print(json.dumps({"training": row}), flush=True)
    for n, b in zip(args.sizes, args.batches, strict=True):
        print(json.dumps({"energy": energy_case(n, b, args.repeats)}), flush=True)


if __name__ == "__main__":
    main()
