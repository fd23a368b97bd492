"""The reproduction's classifier: a small BatchNorm ResNet trained here on :mod:`adascale.shapes`.

``python -m adascale.fixture`` trains the shipped checkpoints (one per seed) into
``adascale/checkpoints/``; :func:`load_fixture` loads one, or trains and caches it when it is
missing (a few minutes on two CPU cores). The checkpoint's name holds a hash of the training
settings, so a changed recipe never loads stale weights.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as TF

from adascale import shapes

CHECKPOINTS = Path(__file__).resolve().parent / "checkpoints"


class Block(nn.Module):
    """Pre-activation-free basic block: conv-BN-ReLU-conv-BN plus a (projected) shortcut."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out)
            )

    def forward(self, x: Tensor) -> Tensor:
        out = TF.relu(self.bn1(self.conv1(x)))
        return TF.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class TinyResNet(nn.Module):
    """ResNet with one block per stage; ``fc`` is the head, its input the pooled ReLU features.

    Named like torchvision's ResNet (``fc``), so :func:`adascale.split_model` finds the head.
    """

    def __init__(self, widths: tuple[int, ...] = (16, 32, 64, 256), classes: int = 8) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(1, widths[0], 3, 2, 1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU()
        )
        stages, c = [], widths[0]
        for i, w in enumerate(widths):
            stages.append(Block(c, w, 1 if i == 0 else 2))
            c = w
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(c, classes)

    def features(self, x: Tensor) -> Tensor:
        return self.stages(self.stem(x)).mean(dim=(2, 3))

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.features(x))


@dataclasses.dataclass(frozen=True)
class Recipe:
    """How a fixture is trained; its hash names the checkpoint."""

    seed: int = 0
    widths: tuple[int, ...] = (16, 32, 64, 256)
    n_per_class: int = 500
    epochs: int = 5
    batch_size: int = 128
    lr: float = 0.05
    weight_decay: float = 5e-4

    def key(self) -> str:
        text = json.dumps(dataclasses.asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def train_fixture(recipe: Recipe, progress: bool = False) -> tuple[TinyResNet, dict[str, float]]:
    """Train a :class:`TinyResNet` on the ID shape classes; a fresh draw of images every epoch."""
    torch.manual_seed(recipe.seed)
    model = TinyResNet(recipe.widths, len(shapes.ID_CLASSES))
    opt = torch.optim.SGD(
        model.parameters(),
        lr=recipe.lr,
        momentum=0.9,
        weight_decay=recipe.weight_decay,
        nesterov=True,
    )
    steps_per_epoch = len(shapes.ID_CLASSES) * recipe.n_per_class // recipe.batch_size
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, recipe.lr, total_steps=recipe.epochs * steps_per_epoch
    )
    model.train()
    for epoch in range(recipe.epochs):
        x, y = shapes.shapes(
            shapes.ID_CLASSES, recipe.n_per_class, seed=10_000 * recipe.seed + epoch
        )
        xt, yt = torch.from_numpy(shapes.normalise(x)), torch.from_numpy(y)
        total = 0.0
        for i in range(steps_per_epoch):
            sl = slice(i * recipe.batch_size, (i + 1) * recipe.batch_size)
            loss = TF.cross_entropy(model(xt[sl]), yt[sl])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss.detach())
        if progress:
            print(
                f"seed {recipe.seed} epoch {epoch}: loss {total / steps_per_epoch:.4f}",
                file=sys.stderr,
            )
    model.eval()
    return model, {"accuracy": id_accuracy(model, seed=10_000 * recipe.seed + 9_999)}


def id_accuracy(model: nn.Module, seed: int, n_per_class: int = 200) -> float:
    """Accuracy on a fresh draw of the ID classes."""
    x, y = shapes.shapes(shapes.ID_CLASSES, n_per_class, seed=seed)
    with torch.no_grad():
        pred = model(torch.from_numpy(shapes.normalise(x))).argmax(1).numpy()
    return float(np.mean(pred == y))


def checkpoint_path(recipe: Recipe, root: Path = CHECKPOINTS) -> Path:
    return root / f"tinyresnet-seed{recipe.seed}-{recipe.key()}.pt"


def load_fixture(recipe: Recipe, root: Path = CHECKPOINTS, train: bool = True) -> TinyResNet:
    """The trained fixture for ``recipe``, from ``root`` or trained now and saved there."""
    path = checkpoint_path(recipe, root)
    model = TinyResNet(recipe.widths, len(shapes.ID_CLASSES))
    if path.exists():
        state = torch.load(path, map_location="cpu", weights_only=True)
        model.load_state_dict(
            {k: v.float() if v.is_floating_point() else v for k, v in state.items()}
        )
        return model.eval()
    if not train:
        raise FileNotFoundError(f"no fixture checkpoint at {path}; run python -m adascale.fixture")
    trained, info = train_fixture(recipe, progress=True)
    root.mkdir(parents=True, exist_ok=True)
    # half precision halves the shipped files; every user (and the accuracy below) sees these weights
    torch.save(
        {k: v.half() if v.is_floating_point() else v for k, v in trained.state_dict().items()}, path
    )
    model = load_fixture(recipe, root, train=False)
    info["accuracy"] = id_accuracy(model, seed=10_000 * recipe.seed + 9_999)
    path.with_suffix(".json").write_text(
        json.dumps({**dataclasses.asdict(recipe), **info}, indent=1)
    )
    return model


def main() -> None:
    torch.set_num_threads(1)
    seeds = [int(s) for s in sys.argv[1:]] or [0, 1, 2, 3, 4, 5]
    for seed in seeds:
        load_fixture(Recipe(seed=seed))
        print(checkpoint_path(Recipe(seed=seed)).with_suffix(".json").read_text())


if __name__ == "__main__":
    main()
