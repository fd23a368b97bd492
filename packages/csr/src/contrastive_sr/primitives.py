"""The protected primitive set of CSR (upstream ``component/primitive_functions.py``).

Every primitive maps finite float64 arrays to finite float64 arrays: results are clipped to
``±BOUND`` so that a deep tree of products never overflows to ``inf`` (and ``inf - inf`` never makes
a NaN). Each primitive also prints itself as a sympy-parsable string.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

BOUND = 1e100  # far beyond any real feature value, far below float64's overflow


def _clip(a: np.ndarray) -> np.ndarray:
    return np.clip(a, -BOUND, BOUND)


def _mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return _clip(a * b)


def _square(a: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return _clip(a * a)


def _aq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # analytic quotient a / sqrt(1 + b^2): smooth, defined everywhere
    with np.errstate(over="ignore"):
        return a / np.sqrt(1.0 + b * b)


@dataclasses.dataclass(frozen=True)
class Primitive:
    name: str
    arity: int
    function: Callable[..., np.ndarray]
    template: str  # str.format template over the argument strings, sympy syntax


PRIMITIVES: dict[str, Primitive] = {
    p.name: p
    for p in (
        Primitive("add", 2, lambda a, b: _clip(a + b), "({0} + {1})"),
        Primitive("sub", 2, lambda a, b: _clip(a - b), "({0} - {1})"),
        Primitive("mul", 2, _mul, "({0}*{1})"),
        Primitive("aq", 2, _aq, "({0}/sqrt(1 + ({1})**2))"),
        Primitive("sqrt", 1, lambda a: np.sqrt(np.abs(a)), "sqrt(Abs({0}))"),
        Primitive("abslog", 1, lambda a: np.log1p(np.abs(a)), "log(1 + Abs({0}))"),
        Primitive("abs", 1, np.abs, "Abs({0})"),
        Primitive("square", 1, _square, "({0})**2"),
        # clipped first: π·a overflows for |a| near float64's max (unreachable inside a tree,
        # whose values stay within ±BOUND, but the primitive is total)
        Primitive("sinpi", 1, lambda a: np.sin(np.pi * _clip(a)), "sin(pi*{0})"),
        Primitive("cospi", 1, lambda a: np.cos(np.pi * _clip(a)), "cos(pi*{0})"),
        Primitive("max", 2, np.maximum, "Max({0}, {1})"),
        Primitive("min", 2, np.minimum, "Min({0}, {1})"),
        Primitive("neg", 1, np.negative, "(-{0})"),
    )
}

DEFAULT_PRIMITIVES: tuple[str, ...] = tuple(PRIMITIVES)


def resolve_primitives(names: tuple[str, ...] | list[str]) -> list[Primitive]:
    """The primitives named, in order; ``ValueError`` naming an unknown one."""
    if len(names) == 0:
        raise ValueError("primitives must name at least one primitive, got an empty list")
    unknown = [n for n in names if n not in PRIMITIVES]
    if unknown:
        raise ValueError(
            f"unknown primitive(s) {unknown}; expected names from {sorted(PRIMITIVES)}"
        )
    return [PRIMITIVES[n] for n in names]
