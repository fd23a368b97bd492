"""The paper's rate table (spec §2.3): E[(1/T)Σ‖∇f(x_t)‖] = Õ(T^{-exponent}).

Rates are stated in the gradient norm (not squared) of the average iterate, for noise with a finite
p-th moment, p ∈ (1, 2]. The constants behind Õ are unverified (third-party notes of the paper); only
the exponents are used here.

| method key | exponent | valid p | result |
|---|---|---|---|
| ``adagrad`` | (3p-4)/(4p) | 4/3 < p ≤ 2 | Thm 3.1 (trivial at p ≤ 4/3) |
| ``adagrad_classic`` | (2p-3)/(2p) | 3/2 < p ≤ 2 | the classic proxy c = σ the paper improves on |
| ``adagrad_norm`` | (3p-4)/(4p) | 4/3 < p ≤ 2 | Thm C.1 |
| ``adagrad_norm_bounded`` | (p-1)/(2p) | 1 < p ≤ 2 | Thm 4.2, bounded objective |
| ``minimax`` (= ``clipped_sgd_p``, ``nsgdm_p``) | (p-1)/(3p-2) | 1 < p ≤ 2 | clipped SGD / NSGD-M knowing p |
| ``nsgdm`` | (p-1)/(2p) | 1 < p ≤ 2 | NSGD-M without knowledge of p |
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Rate:
    exponent: Callable[[float], float]
    p_min: float  # exclusive
    source: str


_ADAGRAD = Rate(lambda p: (3 * p - 4) / (4 * p), 4 / 3, "Thm 3.1 (AdaGrad)")
_MINIMAX = Rate(lambda p: (p - 1) / (3 * p - 2), 1.0, "minimax (clipped SGD / NSGD-M knowing p)")

RATES: dict[str, Rate] = {
    "adagrad": _ADAGRAD,
    "adagrad_classic": Rate(lambda p: (2 * p - 3) / (2 * p), 1.5, "classic proxy c = σ"),
    "adagrad_norm": Rate(_ADAGRAD.exponent, 4 / 3, "Thm C.1 (AdaGrad-Norm)"),
    "adagrad_norm_bounded": Rate(lambda p: (p - 1) / (2 * p), 1.0, "Thm 4.2 (bounded objective)"),
    "minimax": _MINIMAX,
    "clipped_sgd_p": _MINIMAX,
    "nsgdm_p": _MINIMAX,
    "nsgdm": Rate(lambda p: (p - 1) / (2 * p), 1.0, "NSGD-M without p (Hübler et al. 2025)"),
}


def exponent(method: str, p: float) -> float:
    """The rate exponent of ``method`` at tail index ``p`` (rate T^{-exponent}).

    Raises ``ValueError`` for p outside (1, 2], an unknown method, or p at or below the method's
    validity edge (AdaGrad: "bound is trivial for p <= 4/3").
    """
    if method not in RATES:
        raise ValueError(f"unknown method {method!r}; known: {sorted(RATES)}")
    if not (isinstance(p, (int, float)) and math.isfinite(p) and 1 < p <= 2):
        raise ValueError(f"p must lie in (1, 2] (a finite p-th moment with p > 1), got {p!r}")
    rate = RATES[method]
    if p <= rate.p_min:
        if rate.p_min == 4 / 3:
            raise ValueError(f"bound is trivial for p <= 4/3 ({method}, p = {p})")
        raise ValueError(f"{method}: the bound needs p > {rate.p_min:g}, got p = {p}")
    return rate.exponent(p)


__all__ = ["RATES", "Rate", "exponent"]
