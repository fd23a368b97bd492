"""Benchmark: the grounded flow energy against the official double solve, and training throughput.

    python benchmarks/bench_energy.py [--sizes 90 200 400] [--batch 64] [--official-batches 64 2 1]

1. ``flow_energy(solver="pinv")`` (one batched call, batch ``--batch``) against the official
   ``dial/routing.py`` formulation (a per-subject loop: incidence matrix, ``L_g = incᵀ diag(g) inc``,
   two ``torch.linalg.solve`` with E right-hand sides), dense SC, float32 as the official code, same
   inputs; also our batched ``solver="solve"`` (float64: the double solve refuses float32).
   The official cost grows as N²E = O(N⁴) on dense SC, so the official side and the batched solve
   run on the first ``--official-batches`` subjects only and every speed-up is per subject (time per
   subject, official over ours). Where the official dense E × E ``diag(g)`` would take more than
   ``DENSE_DIAG_LIMIT`` bytes (N = 400: E = 79 800, 25 GB in float32) the official side builds the
   same ``L_g`` as ``incᵀ (g ⊙ inc)`` and the row says so.
2. Training subjects per second: one optimisation step (batch 32, N = 94, 10 % density) of AFR-Net
   against the dual-stream GCN (dense; torch-geometric's too when installed).
Ratios come from ``shared_core.bench.compare`` (interleaved, median of per-pair ratios).
"""

from __future__ import annotations

import argparse
import contextlib
import json
from typing import Any

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


DENSE_DIAG_LIMIT = 4 * 2**30  # bytes of the official E x E diag(g); above it, incᵀ (g ⊙ inc)


def dense_diag_fits(edges: int, dtype: torch.dtype = torch.float32) -> bool:
    return edges * edges * torch.finfo(dtype).bits // 8 <= DENSE_DIAG_LIMIT


def official_energy(
    sc: torch.Tensor,
    fc: torch.Tensor,
    g: torch.Tensor,
    delta: float = 1e-6,
    *,
    dense_diag: bool | None = None,
) -> torch.Tensor:
    """``compute_edge_energy`` of the official code for one subject (its incidence matrix and two
    solves), given the conductances. ``dense_diag=None``: as written (the dense ``diag(g)``) where
    that fits in ``DENSE_DIAG_LIMIT``; ``False``: ``L_g = incᵀ (g ⊙ inc)``, the same matrix without
    its most expensive step."""
    n = sc.shape[0]
    edges = sc_edges(sc)
    inc = torch.zeros(edges.shape[1], n, dtype=sc.dtype)
    idx = torch.arange(edges.shape[1])
    inc[idx, edges[0]] = 1.0
    inc[idx, edges[1]] = -1.0
    if dense_diag is None:
        dense_diag = dense_diag_fits(g.numel(), g.dtype)
    weighted = torch.diag(g) @ inc if dense_diag else g[:, None] * inc
    lap = inc.T @ weighted + delta * torch.eye(n, dtype=sc.dtype)
    x = _safe_solve(lap, inc.T)
    z = _safe_solve(lap, task_laplacian(fc) @ x)
    return 100.0 * 2.0 * g * (inc * z.T).sum(1)


def energy_case(n: int, batch: int, official_batch: int, repeats: int) -> dict[str, Any]:
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
    k = official_batch

    def official(dense_diag: bool | None = None) -> None:
        for b in range(k):
            official_energy(sc[b], fc[b], g[b], dense_diag=dense_diag)

    # per subject: (official / k) / (ours / batch) = (batch / k) / ratio
    ours = compare(lambda: flow_energy(sc, fc, dense, solver="pinv"), official,
                   name="pinv", baseline_name="official", repeats=repeats, warmup=1)  # fmt: skip
    lean = ours  # where the dense diag(g) does not fit, the official side is already without it
    if dense_diag_fits(int(e.shape[1])):
        lean = compare(lambda: flow_energy(sc, fc, dense, solver="pinv"),
                       lambda: official(dense_diag=False), name="pinv",
                       baseline_name="official without diag(g)", repeats=repeats, warmup=1)  # fmt: skip
    sc64, fc64, dense64 = sc[:k].double(), fc[:k].double(), dense[:k].double()  # float64-only
    solve = compare(lambda: flow_energy(sc64, fc64, dense64, solver="solve"), official,
                    name="batched solve", baseline_name="official", repeats=repeats, warmup=1)  # fmt: skip
    ref = official_energy(sc[0].double(), fc[0].double(), g[0].double())
    official32 = official_energy(sc[0], fc[0], g[0]).double()
    got = flow_energy(sc[:1], fc[:1], dense[:1], solver="pinv")[0][e[0], e[1]].double()
    return {
        "N": n, "E": int(e.shape[1]), "pinv_batch": batch, "official_batch": k,
        "official_dense_diag": dense_diag_fits(int(e.shape[1])),
        "pinv_speedup_per_subject": batch / k / ours.ratio,
        "pinv_ms_per_subject": ours.candidate_s * 1e3 / batch,
        "official_ms_per_subject": ours.baseline_s * 1e3 / k,
        "pinv_speedup_vs_no_diag_per_subject": batch / k / lean.ratio,
        "official_no_diag_ms_per_subject": lean.baseline_s * 1e3 / k,
        "batched_solve_speedup_per_subject": 1 / solve.ratio,
        "batched_solve_ms_per_subject": solve.candidate_s * 1e3 / k,
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
    parser.add_argument("--batch", type=int, default=64, help="subjects in our pinv call")
    parser.add_argument(
        "--official-batches", type=int, nargs="+", default=[64, 2, 1],
        help="subjects of the official loop and of our batched solve, per size",
    )  # fmt: skip
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    # one JSON line per case as it finishes: the large official solves take minutes on a busy CPU
    for row in training_case(args.repeats):
        print(json.dumps({"training": row}), flush=True)
    for n, k in zip(args.sizes, args.official_batches, strict=True):
        row = energy_case(n, args.batch, min(k, args.batch), args.repeats)
        print(json.dumps({"energy": row}), flush=True)


if __name__ == "__main__":
    main()
