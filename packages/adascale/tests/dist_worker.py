"""One rank of test_distributed: ``python dist_worker.py RANK WORLD PORT OUT`` (WORLD 1 = no group).

A script, not an imported test module: pytest's importlib mode leaves test modules unimportable
from spawned processes.
"""

import json
import os
import sys

import torch
import torch.distributed as dist
from adascale import AdaSCALE, OptFS, ReAct, evaluate
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(2, 100, 3, padding=1), nn.ReLU())
        self.fc = nn.Linear(100, 5)

    def features(self, x):
        return self.body(x).mean(dim=(2, 3))


def main(rank: int, world: int, port: int, out: str) -> None:
    torch.set_num_threads(1)
    if world > 1:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=world)
    g = torch.Generator().manual_seed(0)
    ind, ood = (
        torch.randn(24, 2, 6, 6, generator=g),
        torch.randn(12, 2, 6, 6, generator=g) * 1.2 + 0.1,
    )

    def loader(t):
        ds = TensorDataset(t)
        sampler = DistributedSampler(ds, shuffle=False) if world > 1 else None
        return DataLoader(ds, batch_size=4, sampler=sampler)

    torch.manual_seed(0)
    net = Net().eval()
    detectors = {
        "adascale": AdaSCALE(net.features, net.fc, n_fit=None),
        "react": ReAct(net.features, net.fc, n_fit=None),
        "optfs": OptFS(net.features, net.fc, n_fit=None),
    }
    results = {}
    for name, det in detectors.items():
        det.fit(loader(ind))
        results[name] = evaluate(det, loader(ind), {"ood": loader(ood)})["ood"]
    with open(out, "w") as f:
        json.dump(results, f)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
