"""Shampoo with eigh vs PRISM inverse roots on ResNet-20 / CIFAR-10 (Sec. 6.2): NOT run in CI.

    python packages/prism/benchmarks/gpu_shampoo_cifar.py --data ~/cifar10 [--epochs 50]

Needs torchvision, a CUDA GPU and CIFAR-10 already on disk (``torchvision.datasets.CIFAR10`` layout;
no download here). The paper's disclosed settings: Shampoo p = 2, lr 0.001, weight decay 0.0005,
maximum preconditioner size 2048, 5 PRISM iterations; a stride-one ResNet-20. Logs, per epoch and
per root backend, the test accuracy and the cumulative wall-clock.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from prism_matfn.optim import PrismShampoo
from torch import nn


class Residual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
            nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout),
        )  # fmt: skip
        self.skip = (
            nn.Identity()
            if stride == 1 and cin == cout
            else nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.skip(x))


def resnet20(classes: int = 10) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
    cin = 16
    for cout, stride in ((16, 1), (32, 2), (64, 2)):
        for i in range(3):
            layers.append(Residual(cin, cout, stride if i == 0 else 1))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes)]
    return nn.Sequential(*layers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--backends", default="eigh,prism")
    parser.add_argument("--out", default="gpu_shampoo_cifar.json")
    args = parser.parse_args()
    import torchvision
    import torchvision.transforms as T

    if not torch.cuda.is_available():
        raise SystemExit("gpu_shampoo_cifar.py needs a CUDA device")
    norm = T.Normalize((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))
    train_set = torchvision.datasets.CIFAR10(
        args.data, train=True, download=False,
        transform=T.Compose([T.RandomCrop(32, 4), T.RandomHorizontalFlip(), T.ToTensor(), norm]),
    )  # fmt: skip
    test_set = torchvision.datasets.CIFAR10(
        args.data, train=False, download=False, transform=T.Compose([T.ToTensor(), norm])
    )
    loader = torch.utils.data.DataLoader(
        train_set, 128, shuffle=True, num_workers=4, drop_last=True
    )
    test_loader = torch.utils.data.DataLoader(test_set, 512, num_workers=4)
    results = {}
    for backend in args.backends.split(","):
        torch.manual_seed(0)
        model = resnet20().cuda()
        opt = PrismShampoo(
            model.parameters(), lr=1e-3, weight_decay=5e-4, root=2, max_preconditioner_dim=2048,
            matrix_fn=backend, prism_steps=5,
        )  # fmt: skip
        history, elapsed = [], 0.0
        for epoch in range(args.epochs):
            model.train()
            torch.cuda.synchronize()
            start = time.time()
            for x, y in loader:
                loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            torch.cuda.synchronize()
            elapsed += time.time() - start
            model.eval()
            correct = 0
            with torch.no_grad():
                for x, y in test_loader:
                    correct += (model(x.cuda()).argmax(1) == y.cuda()).sum().item()
            history.append(
                {"epoch": epoch, "test_accuracy": correct / len(test_set), "train_s": elapsed}
            )
            print(backend, history[-1], flush=True)
        results[backend] = history
    with open(args.out, "w") as f:
        json.dump({"card": torch.cuda.get_device_name(), "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
