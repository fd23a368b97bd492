"""The update rules as pure functions on numpy arrays or torch tensors.

Every function takes the iterate ``x`` with the parameter vector on the LAST axis and any number of
leading batch axes (the harness runs ``(seeds, d)`` arrays: one row per seed), and returns new arrays;
nothing is modified in place. The same code runs on numpy and torch because it uses only arithmetic
operators and ``.sum(-1)``.

AdaGrad (the paper's Algorithm, v₀ = 0 unless a caller starts elsewhere)::

    v_t = v_{t-1} + g_t ⊙ g_t,        x_{t+1} = x_t - γ g_t ⊘ (λ + sqrt(v_t))

AdaGrad-Norm: the same with one scalar accumulator per row, ``v_t = v_{t-1} + ‖g_t‖₂²``.

λ sits outside the square root (torch's ``eps``). With λ = 0 a coordinate whose gradients were all
zero has 0/0: its step is defined as 0 (then g = 0 too, since v ≥ g²), never NaN.
"""

from __future__ import annotations

from typing import Any

Array = Any  # a numpy array or a torch tensor


def _safe(denominator: Array) -> Array:
    # Where the denominator is 0 the numerator is 0 too (v >= g², λ >= 0): divide by 1 there.
    return denominator + (denominator == 0)


def _norm(g: Array) -> Array:
    """Euclidean norm over the last axis, keeping it (shape ``(..., 1)``)."""
    return (g * g).sum(-1)[..., None] ** 0.5


def adagrad_step(x: Array, g: Array, v: Array, lr: float, eps: float) -> tuple[Array, Array]:
    """One coordinate-wise AdaGrad step: returns ``(x_next, v_next)``; ``v`` has ``x``'s shape."""
    v = v + g * g
    return x - lr * g / _safe(eps + v**0.5), v


def adagrad_norm_step(x: Array, g: Array, v: Array, lr: float, eps: float) -> tuple[Array, Array]:
    """One AdaGrad-Norm step: ``v`` has shape ``x.shape[:-1]`` (one scalar per row)."""
    v = v + (g * g).sum(-1)
    return x - lr * g / _safe(eps + v[..., None] ** 0.5), v


def sgd_step(x: Array, g: Array, lr: float) -> Array:
    """Plain SGD: ``x - lr g``."""
    return x - lr * g


def clip_by_norm(g: Array, clip: float) -> Array:
    """``g · min(1, clip/‖g‖₂)`` row by row (a zero row stays zero)."""
    norm = _norm(g)
    longest = norm + (norm < clip) * (clip - norm)  # max(‖g‖, clip) with operators only
    return g * (clip / longest)


def clipped_sgd_step(
    x: Array, g: Array, m: Array, lr: float, clip: float, momentum: float = 0.0
) -> tuple[Array, Array]:
    """Clipped SGD with heavy-ball momentum: ``m = momentum·m + clip(g)``, ``x -= lr m``.

    ``momentum=0`` is the clipped SGD of Zhang et al. (2020); ``m`` is then just the clipped gradient.
    """
    m = momentum * m + clip_by_norm(g, clip)
    return x - lr * m, m


def nsgdm_step(x: Array, g: Array, m: Array, lr: float, beta: float) -> tuple[Array, Array]:
    """Normalized SGD with momentum (Cutkosky & Mehta 2021): ``m = βm + (1-β)g``, ``x -= lr m/‖m‖``."""
    m = beta * m + (1.0 - beta) * g
    return x - lr * m / _safe(_norm(m)), m
