"""The harness's methods by name: a state initialiser and a step built on :mod:`.functional`.

A :class:`Stepper` runs a batch of iterates ``(..., d)`` (one row per seed) and keeps its state as
arrays of matching shape, so one Python loop over t drives every seed at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from adagrad_heavytail import functional as F
from adagrad_heavytail.schedules import METHODS

_REQUIRED: dict[str, tuple[str, ...]] = {
    "adagrad": ("lr", "eps"),
    "adagrad_norm": ("lr", "eps"),
    "sgd": ("lr",),
    "clipped_sgd": ("lr", "clip"),
    "nsgdm": ("lr", "beta"),
}
_OPTIONAL: dict[str, tuple[str, ...]] = {"clipped_sgd": ("momentum",)}


@dataclass(frozen=True)
class Stepper:
    """``state = init(x)``; ``x, state = step(x, g, state)``."""

    method: str
    params: Mapping[str, float]
    init: Callable[[np.ndarray], Any]
    step: Callable[[np.ndarray, np.ndarray, Any], tuple[np.ndarray, Any]]


def _check_params(method: str, params: Mapping[str, Any]) -> dict[str, float]:
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; known: {METHODS}")
    allowed = _REQUIRED[method] + _OPTIONAL.get(method, ())
    missing = [k for k in _REQUIRED[method] if k not in params]
    extra = [k for k in params if k not in allowed]
    if missing or extra:
        raise ValueError(
            f"{method} takes parameters {allowed}; missing {missing}, unexpected {extra}"
        )
    out = {k: float(v) for k, v in params.items()}
    if not out["lr"] > 0:
        raise ValueError(f"Invalid learning rate: {out['lr']}")
    if out.get("eps", 0.0) < 0:
        raise ValueError(f"Invalid epsilon value: {out['eps']}")
    if "clip" in out and not out["clip"] > 0:
        raise ValueError(f"clip must be > 0, got {out['clip']}")
    if "beta" in out and not 0 <= out["beta"] < 1:
        raise ValueError(f"beta must lie in [0, 1), got {out['beta']}")
    return out


def stepper(method: str, params: Mapping[str, Any]) -> Stepper:
    """The :class:`Stepper` of ``method`` (a :data:`~adagrad_heavytail.schedules.METHODS` name)."""
    p = _check_params(method, params)
    lr = p["lr"]
    if method == "adagrad":
        eps = p["eps"]
        return Stepper(method, p, np.zeros_like, lambda x, g, v: F.adagrad_step(x, g, v, lr, eps))
    if method == "adagrad_norm":
        eps = p["eps"]
        return Stepper(
            method,
            p,
            lambda x: np.zeros(x.shape[:-1]),
            lambda x, g, v: F.adagrad_norm_step(x, g, v, lr, eps),
        )
    if method == "sgd":
        return Stepper(method, p, lambda x: None, lambda x, g, s: (F.sgd_step(x, g, lr), s))
    if method == "clipped_sgd":
        clip, momentum = p["clip"], p.get("momentum", 0.0)
        return Stepper(
            method,
            p,
            np.zeros_like,
            lambda x, g, m: F.clipped_sgd_step(x, g, m, lr, clip, momentum),
        )
    beta = p["beta"]
    return Stepper(method, p, np.zeros_like, lambda x, g, m: F.nsgdm_step(x, g, m, lr, beta))


__all__ = ["Stepper", "stepper"]
