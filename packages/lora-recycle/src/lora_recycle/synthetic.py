"""A synthetic LoRA hub where relevance is controlled (spec §5): the reproduction's fixture.

A teacher ``W0`` (classes × d) labels ``y = argmax(W0 x)``; a base MLP is pretrained on it. Task ``t``
relabels with ``W_t = W0 + 1.5 U_t V_tᵀ`` (a random rank-2 perturbation); a *related* task keeps
``U_t, V_t`` plus noise 0.3. The pool holds one rank-4 LoRA per random task on every linear layer,
all trained at once (batched over the pool) with Adam.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from lora_recycle.adapters import LoraExpert

PERTURBATION = 1.5
RELATED_NOISE = 0.3
TASK_RANK = 2


class Classifier(nn.Module):
    """An MLP d → h → h → classes that returns ``{"logits", "loss"}`` (the Trainer's idiom)."""

    def __init__(self, d_in: int, hidden: int, n_classes: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_in, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, n_classes),
        )

    def forward(
        self, x: torch.Tensor, labels: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        logits = self.net(x)
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = F.cross_entropy(logits, labels)
        return out


@dataclass
class Task:
    u: torch.Tensor
    v: torch.Tensor

    def matrix(self, w0: torch.Tensor) -> torch.Tensor:
        return w0 + PERTURBATION * self.u @ self.v.T

    def related(self, generator: torch.Generator) -> Task:
        return Task(
            self.u + RELATED_NOISE * torch.randn(self.u.shape, generator=generator),
            self.v + RELATED_NOISE * torch.randn(self.v.shape, generator=generator),
        )


def random_task(n_classes: int, d_in: int, generator: torch.Generator) -> Task:
    # U, V with unit-variance entries scaled so 1.5·U Vᵀ has entries of W0's order (std ≈ 1.5)
    return Task(
        torch.randn(n_classes, TASK_RANK, generator=generator) / math.sqrt(TASK_RANK),
        torch.randn(d_in, TASK_RANK, generator=generator),
    )


def sample(
    w: torch.Tensor, n: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(n, w.shape[1], generator=generator)
    return x, (x @ w.T).argmax(-1)


def pretrain_base(
    w0: torch.Tensor,
    hidden: int,
    steps: int,
    weight_decay: float,
    seed: int,
    label_smoothing: float = 0.0,
) -> Classifier:
    """The base, trained on the shared teacher; ``weight_decay``/``label_smoothing`` calibrate it."""
    torch.manual_seed(seed)
    model = Classifier(w0.shape[1], hidden, w0.shape[0])
    generator = torch.Generator().manual_seed(seed + 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=weight_decay)
    for _ in range(steps):
        x, y = sample(w0, 256, generator)
        loss = F.cross_entropy(model(x)["logits"], y, label_smoothing=label_smoothing)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


def _batched_forward(
    base: Classifier,
    factors: list[tuple[torch.Tensor, torch.Tensor]],
    scaling: float,
    x: torch.Tensor,
) -> torch.Tensor:
    """Logits of P LoRA-adapted copies of ``base`` on ``x`` (P, n, d) at once."""
    linears = [m for m in base.net if isinstance(m, nn.Linear)]
    h = x
    for i, (linear, (a, b)) in enumerate(zip(linears, factors, strict=True)):
        h = linear(h) + scaling * torch.einsum(
            "pnr,por->pno", torch.einsum("pni,pri->pnr", h, a), b
        )
        if i < len(linears) - 1:
            h = F.relu(h)
    return h


def train_pool(
    base: Classifier,
    w0: torch.Tensor,
    tasks: list[Task],
    *,
    rank: int = 4,
    alpha: float = 8.0,
    n_samples: int = 3000,
    steps: int = 300,
    lr: float = 1e-2,
    seed: int = 0,
) -> list[LoraExpert]:
    """One LoRA per task (A ~ U(±1/sqrt(in)) as peft, B = 0), trained jointly with Adam on batches of 128."""
    generator = torch.Generator().manual_seed(seed)
    data = [sample(t.matrix(w0), n_samples, generator) for t in tasks]
    xs, ys = torch.stack([d[0] for d in data]), torch.stack([d[1] for d in data])
    linears = [(f"net.{i}", m) for i, m in enumerate(base.net) if isinstance(m, nn.Linear)]
    names = [name for name, _ in linears]
    shapes = [(m.out_features, m.in_features) for _, m in linears]
    p = len(tasks)
    factors = [
        (
            ((torch.rand(p, rank, i, generator=generator) * 2 - 1) / math.sqrt(i)).requires_grad_(),
            torch.zeros(p, o, rank, requires_grad=True),
        )
        for o, i in shapes
    ]
    frozen = copy.deepcopy(base).requires_grad_(False)
    optimizer = torch.optim.Adam([t for pair in factors for t in pair], lr=lr)
    scaling = alpha / rank
    for _ in range(steps):
        idx = torch.randint(0, n_samples, (128,), generator=generator)
        logits = _batched_forward(frozen, factors, scaling, xs[:, idx])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ys[:, idx].reshape(-1)) * p
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return [
        LoraExpert(
            f"task{j}",
            {
                n: (a[j].detach().clone(), b[j].detach().clone())
                for n, (a, b) in zip(names, factors, strict=True)
            },
            scaling,
            {"r": rank, "lora_alpha": alpha},
        )
        for j in range(p)
    ]


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float((model(x)["logits"].argmax(-1) == y).float().mean())


def mean_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float(model(x, labels=y)["loss"])


def as_examples(x: torch.Tensor, y: torch.Tensor) -> list[dict[str, torch.Tensor]]:
    return [{"x": xi, "labels": yi} for xi, yi in zip(x, y, strict=True)]


class TokenClassifier(nn.Module):
    """A tiny Llama read as a classifier: the label is the next token after the sequence, among the
    first ``n_classes`` ids (the LM's logits there); ``x`` holds input ids."""

    def __init__(self, lm: nn.Module, n_classes: int) -> None:
        super().__init__()
        self.lm = lm
        self.n_classes = n_classes

    def forward(
        self, x: torch.Tensor, labels: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        logits = self.lm(input_ids=x).logits[:, -1, : self.n_classes]
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = F.cross_entropy(logits, labels)
        return out


def sample_tokens(
    w: torch.Tensor, n: int, length: int, n_classes: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences of content tokens (ids ≥ ``n_classes``); label = argmax(W · token counts)."""
    content = w.shape[1]
    ids = torch.randint(0, content, (n, length), generator=generator)
    counts = F.one_hot(ids, content).float().sum(1) / length**0.5
    return ids + n_classes, (counts @ w.T).argmax(-1)


def pretrain_llama(
    w0: torch.Tensor,
    length: int,
    steps: int,
    weight_decay: float,
    seed: int,
    label_smoothing: float = 0.0,
) -> TokenClassifier:
    """shared-core's tiny Llama (hidden 32, 2 layers) trained on the shared teacher."""
    from shared_core.models import tiny_llama

    n_classes = w0.shape[0]
    lm = tiny_llama(
        vocab_size=n_classes + w0.shape[1],
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        max_position_embeddings=length + 1,
        seed=seed,
    )
    model = TokenClassifier(lm, n_classes)
    generator = torch.Generator().manual_seed(seed + 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=weight_decay)
    for _ in range(steps):
        x, y = sample_tokens(w0, 64, length, n_classes, generator)
        loss = F.cross_entropy(model(x)["logits"], y, label_smoothing=label_smoothing)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


def train_llama_pool(
    base: TokenClassifier,
    w0: torch.Tensor,
    tasks: list[Task],
    length: int,
    *,
    rank: int = 4,
    alpha: float = 8.0,
    n_samples: int = 1000,
    steps: int = 100,
    lr: float = 1e-2,
    seed: int = 0,
) -> list[LoraExpert]:
    """One peft LoRA per task on every linear layer of the tiny Llama but the LM head."""
    from lora_recycle.interop import train_target_lora

    generator = torch.Generator().manual_seed(seed)
    experts = []
    for j, task in enumerate(tasks):
        x, y = sample_tokens(task.matrix(w0), n_samples, length, base.n_classes, generator)
        data = [{"x": xi, "labels": yi} for xi, yi in zip(x, y, strict=True)]
        experts.append(
            train_target_lora(
                copy.deepcopy(base),
                data,
                r=rank,
                lora_alpha=alpha,
                lora_dropout=0.0,
                lr=lr,
                steps=steps,
                batch_size=64,
                seed=seed + j,
                adapter_id=f"task{j}",
            )
        )
    return experts
