"""GPU check (not run here: no GPU on the build machine): the batched energy and one training epoch
at N = 400 on a CUDA device; prints the date, the card and the timings as JSON.

    python benchmarks/gpu_n400.py [--batch 64] [--subjects 128]
"""

from __future__ import annotations

import argparse
import datetime
import json
import time

import numpy as np
import torch
from afrnet.data import ConnectomeDataset, synthetic_cohort
from afrnet.functional import flow_energy, sc_edges
from afrnet.model import AFRNet
from afrnet.training import TrainConfig, make_optimizer, to_device, train_step


def timed(fn, repeats: int = 5) -> float:  # type: ignore[no-untyped-def]
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--subjects", type=int, default=128)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this script is for a GPU machine")
    dev = torch.device("cuda")
    n = 400
    rng = np.random.default_rng(0)
    a = rng.uniform(0.1, 1.0, size=(args.batch, n, n))
    sc = torch.tensor(
        np.triu(a, 1) + np.swapaxes(np.triu(a, 1), 1, 2), dtype=torch.float32, device=dev
    )
    x = rng.standard_normal((args.batch, 3 * n, n))
    fc = torch.tensor(np.stack([np.corrcoef(s.T) for s in x]), dtype=torch.float32, device=dev)
    e = sc_edges(sc[0])
    w = torch.zeros_like(sc)
    w[:, e[0], e[1]] = 1.0
    w = w + w.transpose(1, 2)
    sc64, fc64, w64 = sc.double(), fc.double(), w.double()  # solver="solve" is float64-only
    energy_s = {
        "pinv": timed(lambda: flow_energy(sc, fc, w, solver="pinv")),
        "solve_float64": timed(lambda: flow_energy(sc64, fc64, w64, solver="solve")),
    }
    cohort = synthetic_cohort(
        args.subjects, base="geometric", num_nodes=n, density=0.05, timepoints=1200
    )
    data = ConnectomeDataset(cohort.sc, cohort.fc, cohort.y)
    model = AFRNet(n).to(dev)
    opt, _ = make_optimizer(model, TrainConfig())
    batches = [to_device(data.batch(range(i, min(i + args.batch, len(data)))), dev)
               for i in range(0, len(data), args.batch)]  # fmt: skip
    epoch_s = timed(lambda: [train_step(model, opt, b, 1.0) for b in batches], repeats=2)
    print(json.dumps({
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "card": torch.cuda.get_device_name(), "N": n, "batch": args.batch,
        "energy_s": energy_s, "epoch_s": epoch_s, "subjects_per_s": len(data) / epoch_s,
    }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
