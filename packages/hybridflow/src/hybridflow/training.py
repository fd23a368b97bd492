"""Training the benefit-cost router: profiles, the utility label and the loss (torch, lazily).

A profile is one subtask run on both the edge and the cloud. Its label is
``dU = lambda_q dq - lambda_t dt - lambda_k k_cloud`` with ``dt = L_cloud - L_edge`` and ``k_cloud`` the
cloud's total tokens. ``dq`` (the quality gain of the cloud) is pluggable: :func:`dq_accuracy` when
the profile knows which answers were right (the paper's accuracy gain), :func:`dq_length` for the
official code's proxy (completion-length difference / 100).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from hybridflow.plan import Subtask

if TYPE_CHECKING:
    import torch

    from hybridflow.router import UtilityRouter


@dataclasses.dataclass(frozen=True)
class SubtaskProfile:
    """One subtask measured on both models. ``quality_*`` is 1/0 correctness (or a score) if known."""

    question: str
    subtask: Subtask
    is_last: bool
    edge_prompt_tokens: int
    edge_completion_tokens: int
    edge_latency_s: float
    cloud_prompt_tokens: int
    cloud_completion_tokens: int
    cloud_latency_s: float
    quality_edge: float | None = None
    quality_cloud: float | None = None

    @property
    def cloud_tokens(self) -> int:
        return self.cloud_prompt_tokens + self.cloud_completion_tokens


def dq_accuracy(p: SubtaskProfile) -> float:
    """The paper's quality gain: cloud correctness minus edge correctness."""
    if p.quality_edge is None or p.quality_cloud is None:
        raise ValueError(
            f"profile of step {p.subtask.id} has no quality_edge/quality_cloud for dq_accuracy"
        )
    return p.quality_cloud - p.quality_edge


def dq_length(p: SubtaskProfile) -> float:
    """The official code's proxy: (completion tokens of the cloud - of the edge) / 100."""
    return (p.cloud_completion_tokens - p.edge_completion_tokens) / 100.0


def utility_label(
    p: SubtaskProfile,
    *,
    dq: Callable[[SubtaskProfile], float] = dq_accuracy,
    lambda_q: float = 1.0,
    lambda_t: float = 0.5,
    lambda_k: float = 0.001,
) -> float:
    """``lambda_q dq - lambda_t (L_cloud - L_edge) - lambda_k k_cloud``."""
    return (
        lambda_q * dq(p)
        - lambda_t * (p.cloud_latency_s - p.edge_latency_s)
        - lambda_k * p.cloud_tokens
    )


def router_loss(
    f: torch.Tensor,
    delta_u: torch.Tensor,
    k_cloud: torch.Tensor,
    l_edge: torch.Tensor,
    l_cloud: torch.Tensor,
    r_b: torch.Tensor,
    r_l: torch.Tensor,
    *,
    delta0: float,
    alpha_b: float,
    alpha_l: float,
    tau: float,
    b_max: float,
    l_max: float,
    lambda_b: float = 1.0,
    lambda_l: float = 1.0,
    huber_delta: float = 1.0,
) -> torch.Tensor:
    """``Huber(f, dU) + lambda_B ReLU(E[p k_C] - B)^2 + lambda_L ReLU(E[p L_C + (1-p) L_E] - L)^2``.

    ``p = sigmoid((sigmoid(f) - delta) / tau)`` with the clipped threshold of routing.
    """
    import torch

    reg = torch.nn.functional.huber_loss(f, delta_u, delta=huber_delta)
    delta = torch.clamp(delta0 + alpha_b * r_b + alpha_l * r_l, 0.0, 1.0)
    p = torch.sigmoid((torch.sigmoid(f) - delta) / tau)
    expected_tokens = (p * k_cloud).mean()
    expected_latency = (p * l_cloud + (1 - p) * l_edge).mean()
    pen_b = torch.relu(expected_tokens - b_max) ** 2
    pen_l = torch.relu(expected_latency - l_max) ** 2
    return reg + lambda_b * pen_b + lambda_l * pen_l


def fit_router(
    router: UtilityRouter,
    profiles: Sequence[SubtaskProfile],
    *,
    dq: Callable[[SubtaskProfile], float] = dq_accuracy,
    lambda_q: float = 1.0,
    lambda_t: float = 0.5,
    lambda_k: float = 0.001,
    step_b_max: float = 5000.0,
    step_l_max: float = 5.0,
    lambda_b: float = 1.0,
    lambda_l: float = 1.0,
    r_max: float = 1.0,
    epochs: int = 30,
    batch_size: int = 32,
    lr: float = 1e-4,
    weight_decay: float = 1e-4,
    dropout: float = 0.1,
    grad_clip: float = 1.0,
    seed: int = 0,
) -> list[float]:
    """AdamW on :func:`router_loss` (official defaults); sets ``router.layers_``; returns epoch losses.

    ``r_B, r_L`` are drawn uniformly in ``[0, r_max]`` per example, so the network sees the budget
    inputs it will see when routing. ``step_b_max``/``step_l_max`` bound the expected per-step cloud
    tokens and latency in the penalties.
    """
    try:
        import torch
    except ModuleNotFoundError as error:
        raise ModuleNotFoundError(
            "UtilityRouter.fit needs pip install 'hybridflow[torch]'", name=error.name
        ) from error
    if len(profiles) == 0:
        raise ValueError("fit needs at least one profile")
    for name, value in {"epochs": epochs, "batch_size": batch_size}.items():
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    rng = np.random.default_rng(seed)
    labels = np.array(
        [
            utility_label(p, dq=dq, lambda_q=lambda_q, lambda_t=lambda_t, lambda_k=lambda_k)
            for p in profiles
        ]
    )
    if not np.all(np.isfinite(labels)):
        raise ValueError(
            "utility labels contain NaN/inf: check the profiles' latencies and quality"
        )
    r_b = rng.uniform(0, r_max, len(profiles)).astype(np.float32)
    r_l = rng.uniform(0, r_max, len(profiles)).astype(np.float32)
    x = router.features(
        [p.question for p in profiles],
        [p.subtask for p in profiles],
        [p.is_last for p in profiles],
        r_b,
        r_l,
    )
    torch.manual_seed(seed)
    net = _torch_mlp(router.d_in, router.hidden, router.depth, dropout)
    tensors = [
        torch.from_numpy(x),
        torch.tensor(labels, dtype=torch.float32),
        torch.tensor([p.cloud_tokens for p in profiles], dtype=torch.float32),
        torch.tensor([p.edge_latency_s for p in profiles], dtype=torch.float32),
        torch.tensor([p.cloud_latency_s for p in profiles], dtype=torch.float32),
        torch.from_numpy(r_b),
        torch.from_numpy(r_l),
    ]
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=weight_decay)
    gen = torch.Generator().manual_seed(seed)
    history = []
    for _ in range(epochs):
        order = torch.randperm(len(profiles), generator=gen)
        total = 0.0
        for start in range(0, len(profiles), batch_size):
            idx = order[start : start + batch_size]
            xb, yb, kb, leb, lcb, rbb, rlb = (t[idx] for t in tensors)
            loss = router_loss(
                net(xb).squeeze(-1), yb, kb, leb, lcb, rbb, rlb,
                delta0=router.delta0, alpha_b=router.alpha_b, alpha_l=router.alpha_l, tau=router.tau,
                b_max=step_b_max, l_max=step_l_max, lambda_b=lambda_b, lambda_l=lambda_l,
            )  # fmt: skip
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), grad_clip)
            opt.step()
            total += float(loss) * len(idx)
        history.append(total / len(profiles))
    if not math.isfinite(history[-1]):
        raise FloatingPointError(f"router training diverged (last epoch loss {history[-1]})")
    linears = [m for m in net if isinstance(m, torch.nn.Linear)]
    router.layers_ = [
        (m.weight.detach().numpy().copy(), m.bias.detach().numpy().copy()) for m in linears
    ]
    router.history_ = history
    return history


def _torch_mlp(d_in: int, hidden: int, depth: int, dropout: float) -> Any:
    import torch

    layers: list[Any] = []
    d = d_in
    for _ in range(depth):
        layers += [torch.nn.Linear(d, hidden), torch.nn.ReLU(), torch.nn.Dropout(dropout)]
        d = hidden
    layers.append(torch.nn.Linear(d, 1))
    return torch.nn.Sequential(*layers)
