"""The reproduction's classifiers: small BatchNorm ResNets trained here on :mod:`adascale.shapes`.

Nothing is shipped: :func:`train_fixture` trains one in about a minute of CPU, and
:func:`load_fixture` caches the weights (under ``$ADASCALE_CACHE``, default
``~/.cache/adascale``; the reproduction caches them in its report instead). The cache name holds a
hash of the training settings, so a changed recipe never loads stale weights.

The architecture keeps what SCALE's premise rests on in ImageNet ResNets: a final feature map of
4x4 before global pooling (not 1x1 or 2x2, where pooling averages almost nothing) and a wide,
ReLU'd penultimate layer (``feature_dim >= 512``) produced by a bottleneck expansion, as in
ResNet-50's last block.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as TF

from adascale import shapes


def cache_dir() -> Path:
    """Where :func:`load_fixture` keeps trained weights (``$ADASCALE_CACHE`` or ``~/.cache``)."""
    return Path(os.environ.get("ADASCALE_CACHE", Path.home() / ".cache" / "adascale"))


class Block(nn.Module):
    """Basic block: conv-BN-ReLU-conv-BN plus a (projected) shortcut, then ReLU."""

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


class Expansion(nn.Module):
    """ResNet-50-style last bottleneck: 1x1 reduce, 3x3, 1x1 expand to ``c_out``, ReLU."""

    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        mid = c_in
        self.body = nn.Sequential(
            nn.Conv2d(c_in, mid, 1, bias=False),
            nn.BatchNorm2d(mid),
            nn.ReLU(),
            nn.Conv2d(mid, mid, 3, 1, 1, bias=False),
            nn.BatchNorm2d(mid),
            nn.ReLU(),
            nn.Conv2d(mid, c_out, 1, bias=False),
            nn.BatchNorm2d(c_out),
        )
        self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: Tensor) -> Tensor:
        return TF.relu(self.body(x) + self.shortcut(x))


class TinyResNet(nn.Module):
    """32x32 input, stem stride 2, stages at 16/8/4 pixels, an expansion to ``feature_dim``.

    ``depth`` basic blocks per stage; the pooled map is 4x4. ``fc`` is the head (named like
    torchvision's ResNet, so :func:`adascale.split_model` finds it).
    """

    def __init__(
        self,
        widths: tuple[int, ...] = (8, 16, 32),
        feature_dim: int = 512,
        depth: int = 1,
        classes: int = 8,
    ) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(1, widths[0], 3, 2, 1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU()
        )
        stages: list[nn.Module] = []
        c = widths[0]
        for i, w in enumerate(widths):
            for j in range(depth):
                stages.append(Block(c, w, 2 if i > 0 and j == 0 else 1))
                c = w
        stages.append(Expansion(c, feature_dim))
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(feature_dim, classes)

    def feature_map(self, x: Tensor) -> Tensor:
        return self.stages(self.stem(x))

    def features(self, x: Tensor) -> Tensor:
        return self.feature_map(x).mean(dim=(2, 3))

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.features(x))


@dataclasses.dataclass(frozen=True)
class Recipe:
    """How a fixture is trained; its hash names the cached weights."""

    seed: int = 0
    widths: tuple[int, ...] = (8, 16, 32)
    feature_dim: int = 512
    depth: int = 1
    n_per_class: int = 250
    epochs: int = 8
    batch_size: int = 32
    lr: float = 0.05
    weight_decay: float = 5e-4

    def key(self) -> str:
        text = json.dumps(dataclasses.asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def build(self) -> TinyResNet:
        return TinyResNet(self.widths, self.feature_dim, self.depth, len(shapes.ID_CLASSES))

    @property
    def name(self) -> str:
        return f"D={self.feature_dim}, depth {self.depth}, seed {self.seed}"


def train_fixture(recipe: Recipe, progress: bool = False) -> TinyResNet:
    """Train on the ID shape classes (a fresh draw of images every epoch); returns it in eval."""
    torch.manual_seed(recipe.seed)
    model = recipe.build()
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
                f"{recipe.name} epoch {epoch}: loss {total / steps_per_epoch:.4f}",
                file=sys.stderr,
            )
    return model.eval()


def id_accuracy(model: nn.Module, seed: int, n_per_class: int = 100) -> float:
    """Accuracy on a fresh draw of the ID classes."""
    x, y = shapes.shapes(shapes.ID_CLASSES, n_per_class, seed=seed)
    with torch.no_grad():
        pred = model(torch.from_numpy(shapes.normalise(x))).argmax(1).numpy()
    return float(np.mean(pred == y))


def encode_state(model: nn.Module) -> str:
    """The model's ``state_dict`` as base64 text (what :meth:`Report.cached` can store)."""
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def decode_state(recipe: Recipe, text: str) -> TinyResNet:
    model = recipe.build()
    state = torch.load(io.BytesIO(base64.b64decode(text)), map_location="cpu", weights_only=True)
    model.load_state_dict(state)
    return model.eval()


def trained_entry(recipe: Recipe) -> dict[str, Any]:
    """Train and describe one fixture: JSON-able weights and the ID accuracy on fresh data."""
    model = train_fixture(recipe, progress=True)
    return {
        "state": encode_state(model),
        "accuracy": id_accuracy(model, seed=10_000 * recipe.seed + 9_999),
    }


def checkpoint_path(recipe: Recipe, root: Path | None = None) -> Path:
    return (root or cache_dir()) / f"tinyresnet-{recipe.key()}.pt"


def load_fixture(recipe: Recipe, root: Path | None = None, train: bool = True) -> TinyResNet:
    """The trained fixture for ``recipe``, from the cache ``root`` or trained now and cached."""
    path = checkpoint_path(recipe, root)
    if path.exists():
        model = recipe.build()
        model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        return model.eval()
    if not train:
        raise FileNotFoundError(f"no fixture at {path}; call load_fixture(recipe) to train it")
    model = train_fixture(recipe, progress=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), path)
    return model


def main() -> None:
    torch.set_num_threads(1)
    seeds = [int(s) for s in sys.argv[1:]] or [0]
    for seed in seeds:
        model = load_fixture(Recipe(seed=seed))
        print(
            seed, checkpoint_path(Recipe(seed=seed)), id_accuracy(model, seed=10_000 * seed + 9_999)
        )


if __name__ == "__main__":
    main()
