"""The Reynolds operator P(M) = |G|^-1 sum_g rho(g) M rho(g)^T, exactly or by a lazy random walk.

For a group given only by generators S (too large to enumerate, a matrix action whose commutant basis
is too costly), iterate the lazy walk operator on the symmetric set S u S^-1,

    Q(M) = M / 2 + (1 / (2 |S u S^-1|)) sum_s rho(s) M rho(s)^T,

which is self-adjoint in the Frobenius product, fixes the commutant and contracts its complement by
the factor ``1 - gamma / 2`` per step, gamma the spectral gap of the Cayley graph Cay(G, S) on the
components of rho (x) rho involved. For an expander generating set gamma = Omega(1), so
O(log(d / eps)) steps suffice. The observed contraction (ratio of successive step norms) is
reported with the result.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

Conjugation = Callable[[np.ndarray], np.ndarray]


@dataclasses.dataclass(frozen=True)
class WalkInfo:
    """How the lazy walk converged: steps, observed contraction per step, error estimate."""

    n_iter: int
    contraction: float
    error_estimate: float
    converged: bool


def permutation_conjugations(perms: Sequence[np.ndarray]) -> list[Conjugation]:
    """``M -> rho(s) M rho(s)^T`` for each ``s`` and its inverse, for permutation generators."""

    def forward(perm: np.ndarray) -> Conjugation:
        def apply(mat: np.ndarray) -> np.ndarray:
            out = np.empty_like(mat)
            out[np.ix_(perm, perm)] = mat
            return out

        return apply

    def backward(perm: np.ndarray) -> Conjugation:
        return lambda mat: mat[np.ix_(perm, perm)]

    return [f(p) for p in perms for f in (forward, backward)]


def matrix_conjugations(mats: Sequence[np.ndarray]) -> list[Conjugation]:
    """``M -> R M R^T`` and ``M -> R^T M R`` for each orthogonal generator ``R``."""

    def forward(r: np.ndarray) -> Conjugation:
        return lambda m: r @ m @ r.T

    def backward(r: np.ndarray) -> Conjugation:
        return lambda m: r.T @ m @ r

    return [f(r) for r in mats for f in (forward, backward)]


def lazy_walk_step(mat: np.ndarray, conjugations: Sequence[Conjugation]) -> np.ndarray:
    """One application of Q."""
    if not conjugations:
        return mat.copy()
    acc = np.zeros_like(mat)
    for conj in conjugations:
        acc += conj(mat)
    return 0.5 * mat + acc / (2 * len(conjugations))


def reynolds_walk(
    mat: np.ndarray,
    conjugations: Sequence[Conjugation],
    tol: float = 1e-10,
    max_iter: int | None = None,
) -> tuple[np.ndarray, WalkInfo]:
    """Iterate Q until the estimated distance to P(mat) is below ``tol * ||mat||_F``.

    The estimate is ``step * c / (1 - c)`` with ``step`` the last step's norm and ``c`` the observed
    contraction (a geometric tail bound). ``max_iter`` defaults to 20 000.
    """
    limit = 20_000 if max_iter is None else max_iter
    scale = max(float(np.linalg.norm(mat)), np.finfo(float).tiny)
    current = np.array(mat, dtype=np.float64)
    prev_step = np.inf
    contraction = 0.0
    estimate = np.inf
    for it in range(1, limit + 1):
        nxt = lazy_walk_step(current, conjugations)
        step = float(np.linalg.norm(nxt - current))
        current = nxt
        if step == 0.0:
            return current, WalkInfo(it, 0.0, 0.0, True)
        if np.isfinite(prev_step):
            contraction = min(step / prev_step, 1.0)
        prev_step = step
        if it >= 3 and contraction < 1.0:
            estimate = step * contraction / (1.0 - contraction)
            if estimate <= tol * scale:
                return current, WalkInfo(it, contraction, estimate / scale, True)
    return current, WalkInfo(limit, contraction, estimate / scale, False)
