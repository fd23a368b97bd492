"""GPU check (not run here: no GPU on the build machine): torch k-NN against the numpy path.

    python packages/csr/benchmarks/gpu_knn.py

Times ``kneighbors`` (the leave-one-out query of every training row, K = 30) at n = 10⁴ and 10⁵,
k = 10 features, on CUDA (``torch.cdist`` + ``topk``) against the numpy CPU path, checks the indices
agree, and prints the date and the card.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from contrastive_sr.neighbors import kneighbors


def main() -> None:
    assert torch.cuda.is_available(), "needs a CUDA device"
    print(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), torch.cuda.get_device_name())
    for n in (10_000, 100_000):
        Z = np.random.default_rng(0).normal(size=(n, 10))
        Zt = torch.tensor(Z, device="cuda")
        torch.cdist(Zt[:4096], Zt)  # warm-up
        torch.cuda.synchronize()
        gpu_idx = []
        start = time.perf_counter()
        for s in range(0, n, 4096):
            d = torch.cdist(Zt[s : s + 4096], Zt).square()
            rows = torch.arange(d.shape[0], device="cuda")
            d[rows, s + rows] = torch.inf
            gpu_idx.append(torch.topk(d, 30, largest=False).indices)
        torch.cuda.synchronize()
        t_gpu = time.perf_counter() - start
        rows = min(n, 20_000)  # the CPU side on a slice, scaled: the full query is O(n²)
        start = time.perf_counter()
        cpu = kneighbors(Z, None, 30)[:rows] if n <= 20_000 else None
        t_cpu = (time.perf_counter() - start) if cpu is not None else float("nan")
        gi = torch.cat(gpu_idx).cpu().numpy()
        if cpu is not None:
            agree = np.mean(np.sort(gi[:rows], 1) == np.sort(cpu, 1))
            print(
                f"n={n}: gpu {t_gpu:.3f}s cpu {t_cpu:.3f}s ratio {t_cpu / t_gpu:.1f}x agree {agree:.4f}"
            )
        else:
            print(f"n={n}: gpu {t_gpu:.3f}s (cpu not run at this n)")


if __name__ == "__main__":
    main()
