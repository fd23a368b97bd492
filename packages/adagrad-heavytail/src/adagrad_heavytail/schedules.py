"""The literature's T-dependent step rules, so that comparisons are like for like.

Every rule takes the same problem constants (L-smoothness, Δ = f(x₁) - inf f, a noise scale σ of the
whole gradient vector) with unit constants, so no method is tuned harder than another. Rates and
sources:

- ``adagrad``, ``adagrad_norm``: any constant γ works in theory; γ = sqrt(Δ/L) balances the lower
  bound's Δ²/γ² and γ²L² terms in d = 1 (our reconstruction, not a statement of the paper); λ = 0.
  AdaGrad steps each coordinate by about γ on its own, so in d dimensions each coordinate is given
  its share Δ/d: γ = sqrt(Δ/(dL)). AdaGrad-Norm moves the whole vector by about γ: γ = sqrt(Δ/L).
- ``sgd``: η = min(1/L, sqrt(Δ/(L T))/σ) (Ghadimi & Lan 2013, finite variance).
- ``clipped_sgd``: τ = σ T^{1/(3p-2)}, η = min(1/L, sqrt(Δ/L)/σ · T^{-(2p-1)/(3p-2)}) (Zhang et al.
  2020), T^{-(p-1)/(3p-2)}. Without ``p`` the p = 2 rule (τ ∝ T^{1/4}): tuned for finite variance.
- ``nsgdm``: with p, 1-β = T^{-p/(3p-2)}, η = sqrt(Δ/L) T^{-(2p-1)/(3p-2)} (Cutkosky & Mehta 2021),
  minimax; without p, 1-β = T^{-1/2}, η = sqrt(Δ/L) T^{-3/4} (Hübler et al. 2025), T^{-(p-1)/(2p)}.
"""

from __future__ import annotations

import math
from typing import Any

METHODS: tuple[str, ...] = ("adagrad", "adagrad_norm", "sgd", "clipped_sgd", "nsgdm")


def _check(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def theory_params(
    method: str,
    T: int,
    p: float | None = None,
    L: float = 1.0,
    Delta: float = 1.0,
    sigma: float = 1.0,
    d: int = 1,
) -> dict[str, Any]:
    """The constructor arguments of ``method`` for a run of ``T`` steps (see the module doc).

    The keys are the optimizers' (and :mod:`~adagrad_heavytail.functional`'s) argument names:
    ``lr`` always, ``eps`` for the AdaGrads, ``clip`` for clipped SGD, ``beta`` for NSGD-M.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; known: {METHODS}")
    if not (isinstance(T, int) and T >= 1):
        raise ValueError(f"T must be an integer >= 1, got {T!r}")
    for name, value in (("L", L), ("Delta", Delta), ("sigma", sigma)):
        _check(name, value)
    if not (isinstance(d, int) and d >= 1):
        raise ValueError(f"d must be an integer >= 1, got {d!r}")
    if p is not None and not (isinstance(p, (int, float)) and 1 < p <= 2):
        raise ValueError(f"p must lie in (1, 2] or be None, got {p!r}")
    scale = math.sqrt(Delta / L)
    if method == "adagrad":
        return {"lr": math.sqrt(Delta / (d * L)), "eps": 0.0}
    if method == "adagrad_norm":
        return {"lr": scale, "eps": 0.0}
    if method == "sgd":
        return {"lr": min(1 / L, scale / (sigma * math.sqrt(T)))}
    q = 2.0 if p is None else float(p)
    if method == "clipped_sgd":
        return {
            "lr": min(1 / L, scale / sigma * T ** (-(2 * q - 1) / (3 * q - 2))),
            "clip": sigma * T ** (1 / (3 * q - 2)),
        }
    if p is None:  # nsgdm, Hübler et al.
        return {"lr": scale * T**-0.75, "beta": 1 - T**-0.5}
    return {"lr": scale * T ** (-(2 * q - 1) / (3 * q - 2)), "beta": 1 - T ** (-q / (3 * q - 2))}


__all__ = ["METHODS", "theory_params"]
