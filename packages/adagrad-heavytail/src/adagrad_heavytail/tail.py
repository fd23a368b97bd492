"""Measuring the tail index p of observed noise, such as the minibatch-gradient noise of a model.

The Hill estimator of the tail index from the ``k`` largest magnitudes ``X_(1) ≥ … ≥ X_(k+1)``::

    α̂ = ( (1/k) Σ_{i≤k} log(X_(i) / X_(k+1)) )^{-1}

For noise with P(|ξ| > x) ~ C x^{-α}, α̂ → α as k → ∞, k/n → 0; its standard error is about α/√k.
The p of the theory is any p < α (E|ξ|^p < ∞); α ≥ 2 means the finite-variance regime.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np


def _magnitudes(x: Any) -> np.ndarray:
    a = np.abs(np.asarray(x, dtype=np.float64).ravel())
    if a.size == 0:
        raise ValueError("need at least one sample, got an empty array")
    if not np.all(np.isfinite(a)):
        raise ValueError("samples contain NaN or inf")
    return a


def hill_estimator(x: Any, k: int) -> float:
    """The Hill estimate of the tail index of |x| from its ``k`` largest values."""
    a = _magnitudes(x)
    if not (isinstance(k, (int, np.integer)) and 1 <= k < a.size):
        raise ValueError(
            f"k must be an integer in [1, {a.size - 1}] for {a.size} samples, got {k!r}"
        )
    top = np.partition(a, a.size - k - 1)[a.size - k - 1 :]  # the k+1 largest, X_(k+1) first
    threshold = top.min()
    if threshold <= 0:
        raise ValueError(f"the {k + 1} largest magnitudes include 0: take a smaller k")
    # X_(k+1) itself adds log 1 = 0 to the sum
    return float(k / np.log(top / threshold).sum())


def default_k(n: int) -> int:
    """``k = ⌊2√n⌋`` (at most n/10): a standard bias/variance compromise for the Hill estimator."""
    return max(1, min(int(2 * np.sqrt(n)), n // 10))


def estimate_tail_index(x: Any, k: int | None = None) -> float:
    """The Hill estimate with ``k`` = :func:`default_k` of the sample size unless given."""
    a = _magnitudes(x)
    if a.size < 20:
        raise ValueError(f"need at least 20 samples to estimate a tail index, got {a.size}")
    return hill_estimator(a, default_k(a.size) if k is None else k)


def minibatch_gradient_noise(
    model: Any, loss_fn: Callable[[Any, Any], Any], batches: Iterable[Any]
) -> np.ndarray:
    """Gradient noise ``g_b - mean_b g_b`` of ``model`` over minibatches, one row per batch.

    ``loss_fn(model, batch)`` returns a scalar torch loss; the parameters are left untouched (their
    ``.grad`` is cleared after). Pool the result (``estimate_tail_index(noise)``) for the tail index
    of the coordinates of the noise, or take row norms for the tail of ‖ξ‖.
    """
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    rows = []
    for batch in batches:
        model.zero_grad(set_to_none=True)
        loss_fn(model, batch).backward()
        rows.append(
            torch.cat(
                [
                    (p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                    for p in params
                ]
            )
            .detach()
            .double()
            .numpy()
        )
    model.zero_grad(set_to_none=True)
    if len(rows) < 2:
        raise ValueError(f"need at least 2 minibatches to measure gradient noise, got {len(rows)}")
    grads = np.stack(rows)
    return grads - grads.mean(axis=0, keepdims=True)


__all__ = ["default_k", "estimate_tail_index", "hill_estimator", "minibatch_gradient_noise"]
