"""Generators of a finite group action on R^d: validation, composition and enumeration.

A group is held by its generators only. Permutation generators are integer arrays ``perm`` of
``range(d)`` acting as ``(rho(g) x)[perm[i]] = x[i]``, i.e. ``rho(g) e_i = e_{perm[i]}``; general
generators are orthogonal ``d x d`` matrices. Enumeration (closure under the generators) is for small
groups only: tests, the exact Reynolds average of a matrix group, Burnside's count.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

ORTHOGONAL_TOL = 1e-8


def as_permutation(generator: Any, d: int, index: int = 0) -> np.ndarray:
    """``generator`` (a sequence, an array or a ``sympy`` ``Permutation``) as an int array of range(d)."""
    form = getattr(generator, "array_form", generator)
    arr = np.asarray(form)
    if arr.ndim != 1 or arr.shape[0] != d:
        raise ValueError(
            f"generator {index} must be a permutation of range({d}) (length {d}), "
            f"got shape {arr.shape}"
        )
    integral = arr.dtype.kind in "iu" or (
        arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))
    )
    if not integral:
        raise ValueError(f"generator {index} must hold integers, got {arr.tolist()[:5]}")
    perm = arr.astype(np.int64)
    if np.any(np.sort(perm) != np.arange(d)):
        values = perm.tolist()
        outside = sorted({v for v in values if not 0 <= v < d})[:5]
        repeated = sorted({v for v in values if values.count(v) > 1})[:5]
        missing = sorted(set(range(d)) - set(values))[:5]
        found = [f"values {outside} are outside range({d})"] if outside else []
        found += [f"values {repeated} repeat"] if repeated else []
        raise ValueError(
            f"generator {index} is not a permutation of range({d}): "
            + "; ".join([*found, f"values {missing} are missing"])
        )
    return perm


def as_orthogonal(generator: Any, d: int | None, index: int = 0) -> np.ndarray:
    """``generator`` as a float64 orthogonal ``d x d`` matrix, or a ValueError naming what is wrong."""
    mat = np.asarray(generator, dtype=np.float64)
    if mat.ndim != 2 or mat.shape[0] != mat.shape[1]:
        raise ValueError(f"generator {index} must be a square matrix, got shape {mat.shape}")
    if d is not None and mat.shape[0] != d:
        raise ValueError(
            f"generator {index} has size {mat.shape[0]}, expected {d} like the first generator"
        )
    if not np.all(np.isfinite(mat)):
        raise ValueError(f"generator {index} holds non-finite values")
    defect = float(np.abs(mat.T @ mat - np.eye(mat.shape[0])).max())
    if defect > ORTHOGONAL_TOL:
        raise ValueError(
            f"generator {index} is not orthogonal: max |R^T R - I| = {defect:.3g} "
            f"(tolerance {ORTHOGONAL_TOL:g})"
        )
    return mat


def permutation_matrix(perm: np.ndarray) -> np.ndarray:
    """The matrix of ``perm``: column ``i`` is ``e_{perm[i]}``."""
    d = perm.shape[0]
    mat = np.zeros((d, d))
    mat[perm, np.arange(d)] = 1.0
    return mat


def compose(first: np.ndarray, then: np.ndarray) -> np.ndarray:
    """The permutation ``then o first`` (apply ``first``, then ``then``)."""
    return then[first]


def inverse(perm: np.ndarray) -> np.ndarray:
    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.shape[0])
    return inv


class GroupTooLarge(RuntimeError):
    """Raised when enumerating a group passes ``max_order`` elements."""


def enumerate_permutations(gens: Sequence[np.ndarray], d: int, max_order: int) -> np.ndarray:
    """Every element of the group the permutations ``gens`` generate, as an ``(|G|, d)`` array."""
    identity = np.arange(d)
    seen = {identity.tobytes(): identity}
    frontier = [identity]
    while frontier:
        nxt = []
        for g in frontier:
            for s in gens:
                h = compose(g, s)
                key = h.tobytes()
                if key not in seen:
                    seen[key] = h
                    nxt.append(h)
                    if len(seen) > max_order:
                        raise GroupTooLarge(f"the group has more than {max_order} elements")
        frontier = nxt
    return np.stack(list(seen.values()))


def enumerate_matrices(gens: Sequence[np.ndarray], d: int, max_order: int) -> np.ndarray:
    """Every element of the group the orthogonal matrices ``gens`` generate, ``(|G|, d, d)``.

    Elements are identified up to 1e-9 (keys rounded at 1e-9); an infinite group raises
    :class:`GroupTooLarge` once ``max_order`` elements have been found.
    """

    def key(mat: np.ndarray) -> bytes:
        return np.round(mat * 1e9).astype(np.int64).tobytes()

    identity = np.eye(d)
    seen = {key(identity): identity}
    frontier = [identity]
    while frontier:
        nxt = []
        for g in frontier:
            for s in gens:
                h = s @ g
                k = key(h)
                if k not in seen:
                    seen[k] = h
                    nxt.append(h)
                    if len(seen) > max_order:
                        raise GroupTooLarge(f"the group has more than {max_order} elements")
        frontier = nxt
    return np.stack(list(seen.values()))


def random_word_matrices(
    gens: Sequence[np.ndarray], d: int, length: int, rng: np.random.Generator
) -> Iterable[np.ndarray]:
    """The states of a lazy random walk of ``length`` steps on the Cayley graph, as matrices."""
    state = np.eye(d)
    sym = [*gens, *[g.T for g in gens]]
    for _ in range(length):
        if sym and rng.random() < 0.5:
            state = sym[rng.integers(len(sym))] @ state
        yield state
