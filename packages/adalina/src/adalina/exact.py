"""Exact semi-values by enumerating all ``2^n`` coalitions (``n <= 20``).

``phi = sum_S U(S) c(S)`` (see :mod:`adalina.sampling`) evaluated over every coalition, in chunks so
the ``(2^n, n)`` coalition matrix never has to be held at once.
"""

from __future__ import annotations

import numpy as np

from adalina.games import GameLike, TabularGame, all_coalitions, evaluate
from adalina.semivalues import SemiValue, SemiValueLike, _log_binom, check_n_players

MAX_EXACT_PLAYERS = 20


def linear_coefficients(n: int, semivalue: SemiValueLike) -> tuple[np.ndarray, np.ndarray]:
    """``(inside[s], outside[s])``, ``s = 0..n``: ``c_i(S) = inside[s]`` if ``i ∈ S`` else ``-outside[s]``.

    ``inside[s] = w_{s-1}/C(n-1, s-1)``, ``outside[s] = w_s/C(n-1, s)``, computed in log space.
    """
    n = check_n_players(n)
    log_w = SemiValue.coerce(semivalue).log_weights(n)
    inside = np.zeros(n + 1)
    outside = np.zeros(n + 1)
    k = np.arange(n, dtype=float)
    inside[1:] = np.exp(log_w - _log_binom(n - 1, k))  # s = k + 1
    outside[:n] = np.exp(log_w - _log_binom(n - 1, k))  # s = k
    return inside, outside


def exact_semivalue(
    game: GameLike, n: int, semivalue: SemiValueLike = "shapley", *, chunk_size: int = 1 << 14
) -> np.ndarray:
    """The semi-value of every player of ``game`` by enumeration (``2 <= n <= 20``).

    A :class:`~adalina.games.TabularGame` is read directly; any other game is queried on all
    ``2^n`` coalitions.
    """
    n = check_n_players(n)
    if n > MAX_EXACT_PLAYERS:
        raise ValueError(
            f"exact enumeration needs 2^n utilities; n={n} exceeds the limit n <= "
            f"{MAX_EXACT_PLAYERS} (use an estimator such as Adalina instead)"
        )
    inside, outside = linear_coefficients(n, semivalue)
    phi = np.zeros(n)
    total = 2**n
    for start in range(0, total, chunk_size):
        masks = all_coalitions(n, start, min(start + chunk_size, total))
        if isinstance(game, TabularGame):
            if game.n_players != n:
                raise ValueError(f"the table holds {game.n_players} players, not n={n}")
            values = game.values[start : start + masks.shape[0]]
        else:
            values = evaluate(game, masks)
        sizes = masks.sum(axis=1)
        phi += masks.T @ (values * inside[sizes]) - (~masks).T @ (values * outside[sizes])
    return phi
