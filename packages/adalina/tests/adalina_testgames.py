"""Small games with known structure, shared by the tests."""

from __future__ import annotations

import math

import numpy as np
from adalina import SemiValue, TabularGame
from adalina.games import all_coalitions, evaluate


def quadratic_game(n: int, seed: int = 0, offset: float = 0.0):
    """A non-additive game: linear part, pairwise interactions and a size effect."""
    rng = np.random.default_rng(seed)
    v = rng.normal(size=n)
    W = rng.normal(size=(n, n)) / n

    def game(masks: np.ndarray) -> np.ndarray:
        z = masks.astype(float)
        return offset + z @ v + np.einsum("bi,ij,bj->b", z, W, z) + np.sin(z.sum(axis=1))

    return game


def tabulated(n: int, seed: int = 0, offset: float = 0.0) -> TabularGame:
    return TabularGame.from_game(quadratic_game(n, seed, offset), n)


def semivalue_by_marginals(game, n: int, semivalue) -> np.ndarray:
    """The textbook definition, ``sum_k w_k mean_{|S|=k, i ∉ S} [U(S ∪ i) - U(S)]``, player by player."""
    w = SemiValue.coerce(semivalue).weights(n)
    masks = all_coalitions(n)
    values = evaluate(game, masks)
    sizes = masks.sum(axis=1)
    phi = np.zeros(n)
    for i in range(n):
        without = np.flatnonzero(~masks[:, i])
        marginal = values[without + (1 << i)] - values[without]
        k = sizes[without]
        for size in range(n):
            phi[i] += w[size] * marginal[k == size].sum() / math.comb(n - 1, size)
    return phi


def rel_error(estimate: np.ndarray, truth: np.ndarray) -> float:
    return float(np.linalg.norm(estimate - truth) / np.linalg.norm(truth))
