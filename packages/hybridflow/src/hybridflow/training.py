"""Training the benefit-cost router: profiles, the utility label, the loss and its gradient (numpy).

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
from threadpoolctl import threadpool_limits

from hybridflow.plan import Subtask
from hybridflow.router import adaptive_threshold, init_mlp, sigmoid

if TYPE_CHECKING:
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


def huber(r: np.ndarray, delta: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Elementwise Huber loss of residuals ``r`` and its derivative (``torch.nn.HuberLoss`` per element)."""
    a = np.abs(r)
    loss = np.where(a <= delta, 0.5 * r**2, delta * (a - 0.5 * delta))
    return loss, np.clip(r, -delta, delta)


def router_loss(
    f: np.ndarray,
    delta_u: np.ndarray,
    k_cloud: np.ndarray,
    l_edge: np.ndarray,
    l_cloud: np.ndarray,
    r_b: np.ndarray,
    r_l: np.ndarray,
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
) -> tuple[float, np.ndarray]:
    """The loss and its gradient with respect to the raw outputs ``f``.

    ``Huber(f, dU) + lambda_B ReLU(E[p k_C] - B)^2 + lambda_L ReLU(E[p L_C + (1-p) L_E] - L)^2`` with
    ``p = sigmoid((sigmoid(f) - delta) / tau)`` and the clipped threshold of routing.
    """
    n = len(f)
    loss, dloss = huber(f - delta_u, huber_delta)
    s = sigmoid(f)
    delta = adaptive_threshold(r_b, r_l, delta0, alpha_b, alpha_l)
    p = sigmoid((s - delta) / tau)
    over_b = max(0.0, float(np.mean(p * k_cloud)) - b_max)
    over_l = max(0.0, float(np.mean(p * l_cloud + (1 - p) * l_edge)) - l_max)
    total = float(loss.mean()) + lambda_b * over_b**2 + lambda_l * over_l**2
    dp_df = p * (1 - p) / tau * s * (1 - s)
    grad = (
        dloss / n
        + (2 * lambda_b * over_b * k_cloud + 2 * lambda_l * over_l * (l_cloud - l_edge)) * dp_df / n
    )
    return total, grad


class _AdamW:
    """``torch.optim.AdamW`` on a list of arrays (decoupled weight decay, bias correction)."""

    def __init__(
        self,
        params: list[np.ndarray],
        lr: float,
        weight_decay: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        self.params, self.lr, self.wd, self.betas, self.eps = params, lr, weight_decay, betas, eps
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]
        self.t = 0

    def step(self, grads: list[np.ndarray]) -> None:
        self.t += 1
        b1, b2 = self.betas
        for p, g, m, v in zip(self.params, grads, self.m, self.v, strict=False):
            p *= 1 - self.lr * self.wd
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            p -= self.lr * (m / (1 - b1**self.t)) / (np.sqrt(v / (1 - b2**self.t)) + self.eps)


def _forward_backward(
    layers: list[tuple[np.ndarray, np.ndarray]],
    x: np.ndarray,
    dropout: float,
    rng: np.random.Generator,
    loss_fn: Callable[[np.ndarray], tuple[float, np.ndarray]],
) -> tuple[float, list[np.ndarray]]:
    """One pass of the ReLU MLP with inverted dropout; gradients in ``[dW0, db0, dW1, ...]`` order."""
    inputs, masks = [x], []
    h = x
    for w, b in layers[:-1]:
        keep = (
            (rng.random((h.shape[0], w.shape[0])) >= dropout) / (1 - dropout)
            if dropout > 0
            else None
        )
        a = h @ w.T + b
        h = np.maximum(a, 0.0) * (keep if keep is not None else 1.0)
        masks.append((a > 0) * (keep if keep is not None else 1.0))
        inputs.append(h)
    w_out, b_out = layers[-1]
    f = (h @ w_out.T + b_out)[:, 0]
    loss, df = loss_fn(f)
    grads: list[np.ndarray] = []
    g = df[:, None].astype(np.float32)
    for i in range(len(layers) - 1, -1, -1):
        w, _ = layers[i]
        grads = [g.T @ inputs[i], g.sum(axis=0), *grads]
        if i > 0:
            g = (g @ w) * masks[i - 1]
    return loss, grads


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
    tokens and latency in the penalties. Plain numpy (the network is 3 small layers): no torch needed.
    """
    if len(profiles) == 0:
        raise ValueError("fit needs at least one profile")
    for name, value in {"epochs": epochs, "batch_size": batch_size}.items():
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if not 0 <= dropout < 1:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}")
    knobs: dict[str, float] = {"lr": lr, "grad_clip": grad_clip}
    for name, knob in knobs.items():
        if not (math.isfinite(knob) and knob > 0):
            raise ValueError(f"{name} must be a finite number > 0, got {knob!r}")
    if not (math.isfinite(weight_decay) and weight_decay >= 0):
        raise ValueError(f"weight_decay must be a finite number >= 0, got {weight_decay!r}")
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
    r_b = rng.uniform(0, r_max, len(profiles))
    r_l = rng.uniform(0, r_max, len(profiles))
    x = router.features(
        [p.question for p in profiles],
        [p.subtask for p in profiles],
        [p.is_last for p in profiles],
        r_b,
        r_l,
    )
    k_cloud = np.array([p.cloud_tokens for p in profiles], dtype=np.float64)
    l_edge = np.array([p.edge_latency_s for p in profiles])
    l_cloud = np.array([p.cloud_latency_s for p in profiles])
    layers = init_mlp(router.d_in, router.hidden, router.depth, rng)
    with threadpool_limits(limits=1):
        history = _train(
            layers, x, labels, k_cloud, l_edge, l_cloud, r_b, r_l, router, rng, locals()
        )
    if not math.isfinite(history[-1]):
        raise FloatingPointError(f"router training diverged (last epoch loss {history[-1]})")
    router.layers_ = layers
    router.history_ = history
    return history


def _train(layers: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray, labels: np.ndarray, k_cloud: np.ndarray,
           l_edge: np.ndarray, l_cloud: np.ndarray, r_b: np.ndarray, r_l: np.ndarray, router: UtilityRouter,
           rng: np.random.Generator, kw: dict[str, Any]) -> list[float]:  # fmt: skip
    epochs, batch_size, dropout, grad_clip = (
        kw["epochs"],
        kw["batch_size"],
        kw["dropout"],
        kw["grad_clip"],
    )
    step_b_max, step_l_max, lambda_b, lambda_l = (
        kw["step_b_max"],
        kw["step_l_max"],
        kw["lambda_b"],
        kw["lambda_l"],
    )
    opt = _AdamW([a for layer in layers for a in layer], kw["lr"], kw["weight_decay"])
    history = []
    n = len(labels)
    for _ in range(epochs):
        order = rng.permutation(n)
        total = 0.0
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]

            def loss_fn(f: np.ndarray, idx: np.ndarray = idx) -> tuple[float, np.ndarray]:
                return router_loss(
                    f, labels[idx], k_cloud[idx], l_edge[idx], l_cloud[idx], r_b[idx], r_l[idx],
                    delta0=router.delta0, alpha_b=router.alpha_b, alpha_l=router.alpha_l, tau=router.tau,
                    b_max=step_b_max, l_max=step_l_max, lambda_b=lambda_b, lambda_l=lambda_l,
                )  # fmt: skip

            loss, grads = _forward_backward(layers, x[idx], dropout, rng, loss_fn)
            norm = float(np.sqrt(sum(float((g * g).sum()) for g in grads)))
            if norm > grad_clip:
                grads = [g * (grad_clip / (norm + 1e-6)) for g in grads]
            opt.step([g.astype(np.float32) for g in grads])
            total += loss * len(idx)
        history.append(total / n)
    return history
