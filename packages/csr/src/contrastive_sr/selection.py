"""Parent selection: automatic-ε lexicase, and the double-lexicase bloat control of CSR.

Automatic ε-lexicase (La Cava et al. 2016): shuffle the training cases; on each case keep the
candidates whose error is within ``ε_case`` of the best remaining one, ``ε_case`` the median absolute
deviation of the population's errors on that case. Double lexicase (upstream
``component/bloat_control/double_lexicase.py``): ``rounds`` lexicase winners, then a roulette on
size with probability ∝ ``max(size) + min(size) − size`` (smaller favoured).
"""

from __future__ import annotations

import numpy as np


def mad_epsilon(errors: np.ndarray) -> np.ndarray:
    """Per-case ε: median absolute deviation over the population (errors is pop × cases)."""
    med = np.median(errors, axis=0)
    return np.median(np.abs(errors - med), axis=0)


def lexicase_select(rng: np.random.Generator, errors: np.ndarray, epsilon: np.ndarray) -> int:
    """One automatic-ε lexicase winner (an index into the population)."""
    candidates = np.arange(errors.shape[0])
    for case in rng.permutation(errors.shape[1]):
        e = errors[candidates, case]
        candidates = candidates[e <= e.min() + epsilon[case]]
        if candidates.size == 1:
            return int(candidates[0])
    return int(candidates[rng.integers(candidates.size)])


def size_roulette(rng: np.random.Generator, sizes: np.ndarray) -> int:
    """Index drawn with probability ∝ ``max + min − size``."""
    w = sizes.max() + sizes.min() - sizes.astype(np.float64)
    if w.sum() <= 0:
        return int(rng.integers(sizes.size))
    return int(rng.choice(sizes.size, p=w / w.sum()))


def double_lexicase(
    rng: np.random.Generator, errors: np.ndarray, sizes: np.ndarray, n_parents: int, rounds: int
) -> list[int]:
    eps = mad_epsilon(errors)
    out = []
    for _ in range(n_parents):
        pool = np.array([lexicase_select(rng, errors, eps) for _ in range(rounds)])
        out.append(int(pool[size_roulette(rng, sizes[pool])]))
    return out


def lexicase(rng: np.random.Generator, errors: np.ndarray, n_parents: int) -> list[int]:
    eps = mad_epsilon(errors)
    return [lexicase_select(rng, errors, eps) for _ in range(n_parents)]


def tournament(
    rng: np.random.Generator, fitness: np.ndarray, n_parents: int, size: int = 7
) -> list[int]:
    picks = rng.integers(fitness.size, size=(n_parents, size))
    return [int(row[np.argmax(fitness[row])]) for row in picks]
