"""Games: utilities on boolean coalition matrices.

A game is any callable ``game(masks) -> values`` with ``masks`` a boolean ``(batch, n)`` array (row
``b`` is a coalition, ``masks[b, i]`` says whether player ``i`` is in it) and ``values`` of shape
``(batch,)`` -- shapiq's convention. A numpy array, a torch tensor or a list is accepted as output.

:class:`Game` is a base class for games that hold state: it adds joblib parallelism (``n_jobs``; the
active joblib backend, e.g. Dask or Ray through ``joblib.parallel_config``, decides where the work
runs). :class:`TabularGame` stores all ``2^n`` utilities for reproducible experiments,
:class:`MarginalGame` explains a model's prediction with a background set (interventional
features) and :class:`DataValuationGame` scores a model trained on a subset of the training points.
The path-dependent tree game is in :mod:`adalina.trees`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

GameLike = Callable[[np.ndarray], Any]

# Coalitions in the table enumerate players as bits: coalition index sum_i 2^i [i ∈ S].
MAX_TABLE_PLAYERS = 24


def _to_numpy(values: Any) -> np.ndarray:
    if hasattr(values, "detach"):  # a torch tensor, possibly on an accelerator
        values = values.detach().cpu()
        if not values.is_floating_point() or values.element_size() < 4:
            # numpy has no bfloat16 (``.numpy()`` raises a bare TypeError) and float16 loses
            # nothing on the way up: widen exactly, without importing torch here
            values = values.double()
        values = values.numpy()
    return np.asarray(values, dtype=float)


def _describe(mask: np.ndarray) -> str:
    members = np.flatnonzero(mask).tolist()
    return f"coalition {members} (players present, of n={mask.size})"


def _index_list_hint(game: GameLike, masks: np.ndarray) -> bool:
    """Whether ``game`` runs on the first coalition as player indices (one list, or a batch of one).

    Only called after the game has already failed; it calls the game once or twice more, on one
    coalition each (uncharged: the run ends with the error either way).
    """
    members = np.flatnonzero(masks[0]).tolist()
    probe: Any = game  # deliberately called outside its declared (mask matrix) signature
    for retry in (members, [members]):
        try:
            probe(retry)
        except Exception:  # this form fails too: try the next, else keep the user's own error
            continue
        return True
    return False


def evaluate(game: GameLike, masks: np.ndarray) -> np.ndarray:
    """``game(masks)`` as a float64 ``(batch,)`` array, or an error naming the fault.

    A ``TypeError``, ``IndexError`` or ``KeyError`` raised by the game is re-raised as a
    ``TypeError`` with a hint only when the game runs on the first coalition given as a list of
    player indices (it was written for index lists); otherwise the game's own error propagates
    unchanged (finding out costs one or two more calls of the game on a single coalition, after
    it has failed). A wrong output shape or a non-finite value raises ``ValueError`` naming the
    first offending coalition. Torch tensors are accepted (bfloat16 and float16 are widened).
    """
    try:
        raw = game(masks)
    except (TypeError, IndexError, KeyError) as err:
        if masks.shape[0] == 0 or not _index_list_hint(game, masks):
            raise
        raise TypeError(
            f"the game failed on a boolean coalition matrix of shape {masks.shape} ({err!r}) but "
            "runs on a list of player indices. Games take a boolean (batch, n_players) matrix -- "
            "row b holds coalition b, True for the players present -- and return a (batch,) "
            "array; wrap an index-list game as lambda m: np.array([f(np.flatnonzero(r)) for r in m])"
        ) from err
    values = _to_numpy(raw)
    if values.shape != (masks.shape[0],):
        raise ValueError(
            f"the game must return one value per coalition, shape ({masks.shape[0]},), for a "
            f"coalition matrix of shape {masks.shape}; got shape {values.shape}"
        )
    bad = ~np.isfinite(values)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"the game returned a non-finite value ({values[first]}) for {_describe(masks[first])}"
        )
    return values


class Game:
    """Base class for stateful games: subclasses implement :meth:`value_function`.

    ``n_jobs`` splits a batch of coalitions over joblib workers (``None`` or 1: in process; -1: all
    cores). Worth it only when one utility costs far more than the transfer of the game, as when
    each coalition trains a model.
    """

    def __init__(self, n_players: int, *, n_jobs: int | None = None) -> None:
        if isinstance(n_players, bool) or not isinstance(n_players, (int, np.integer)):
            raise TypeError(f"n_players must be an int, got {type(n_players).__name__}")
        if n_players < 1:
            raise ValueError(f"n_players must be >= 1, got {n_players}")
        self.n_players = int(n_players)
        self.n_jobs = n_jobs

    def value_function(self, masks: np.ndarray) -> np.ndarray:
        """Utilities of a boolean ``(batch, n_players)`` matrix of coalitions."""
        raise NotImplementedError

    def __call__(self, masks: np.ndarray) -> np.ndarray:
        """Utilities of a boolean ``(batch, n_players)`` matrix, or ``(1,)`` for one ``(n_players,)``
        coalition (shapiq's approximators query the empty and the full coalition that way)."""
        masks = np.asarray(masks)
        if masks.dtype != bool:
            raise TypeError(f"coalitions must be a boolean matrix, got dtype {masks.dtype}")
        if masks.ndim == 1:
            masks = masks[None, :]
        if masks.ndim != 2 or masks.shape[1] != self.n_players:
            raise ValueError(
                f"coalitions must have shape (batch, {self.n_players}) or ({self.n_players},), "
                f"got {masks.shape}"
            )
        if self.n_jobs in (None, 1) or masks.shape[0] < 2:
            return self.value_function(masks)
        from joblib import Parallel, delayed, effective_n_jobs

        chunks = np.array_split(masks, min(masks.shape[0], 4 * effective_n_jobs(self.n_jobs)))
        parts = Parallel(n_jobs=self.n_jobs)(delayed(self.value_function)(c) for c in chunks)
        return np.concatenate([np.asarray(p, dtype=float) for p in parts])


def coalition_index(masks: np.ndarray) -> np.ndarray:
    """The table index ``sum_i 2^i [i ∈ S]`` of each coalition row."""
    return masks.astype(np.int64) @ (np.int64(1) << np.arange(masks.shape[1], dtype=np.int64))


def all_coalitions(n: int, start: int = 0, stop: int | None = None) -> np.ndarray:
    """Boolean matrix of the coalitions with table index ``start..stop-1`` (default: all ``2^n``)."""
    stop = 2**n if stop is None else stop
    idx = np.arange(start, stop, dtype=np.int64)
    return ((idx[:, None] >> np.arange(n, dtype=np.int64)) & 1).astype(bool)


class TabularGame(Game):
    """A game stored as all ``2^n`` utilities (index ``sum_i 2^i [i ∈ S]``).

    Tabulating once makes experiments with large budgets cheap and exactly reproducible.
    """

    def __init__(self, values: np.ndarray) -> None:
        values = np.asarray(values, dtype=float)
        n = values.size.bit_length() - 1 if values.size else 0
        if values.ndim != 1 or values.size != 2**n or n < 1:
            raise ValueError(
                f"a table needs 2^n utilities in a 1-d array (n >= 1), got shape {values.shape}"
            )
        if not np.all(np.isfinite(values)):
            bad = int(np.flatnonzero(~np.isfinite(values))[0])
            raise ValueError(
                f"the table holds a non-finite value at {_describe(all_coalitions(n, bad, bad + 1)[0])}"
            )
        super().__init__(n)
        self.values = values

    @classmethod
    def from_game(cls, game: GameLike, n: int, *, chunk_size: int = 1 << 14) -> TabularGame:
        """Evaluate ``game`` on all ``2^n`` coalitions (``n <= 24``) in chunks."""
        if not 1 <= n <= MAX_TABLE_PLAYERS:
            raise ValueError(
                f"tabulating needs 1 <= n <= {MAX_TABLE_PLAYERS} (2^n utilities), got n={n}"
            )
        total = 2**n
        parts = [
            evaluate(game, all_coalitions(n, start, min(start + chunk_size, total)))
            for start in range(0, total, chunk_size)
        ]
        return cls(np.concatenate(parts))

    def value_function(self, masks: np.ndarray) -> np.ndarray:
        return self.values[coalition_index(masks)]


class MarginalGame(Game):
    """Interventional (marginal) feature game: absent features are drawn from a background set.

    ``U(S) = mean_b f(x_S, z^b_{-S})`` over background rows ``z^b``, for any ``predict`` that maps an
    ``(m, n_features)`` array to ``(m,)`` outputs (pass ``model.predict`` or a lambda picking a
    column of ``predict_proba``).
    """

    def __init__(
        self,
        predict: Callable[[np.ndarray], Any],
        x: np.ndarray,
        background: np.ndarray,
        *,
        max_rows: int = 1 << 16,
        n_jobs: int | None = None,
    ) -> None:
        x = np.asarray(x, dtype=float)
        background = np.asarray(background, dtype=float)
        if x.ndim != 1:
            raise ValueError(f"x must be one point (1-d), got shape {x.shape}")
        if background.ndim != 2 or background.shape[1] != x.size or background.shape[0] < 1:
            raise ValueError(
                f"background must have shape (rows >= 1, {x.size}), got {background.shape}"
            )
        super().__init__(x.size, n_jobs=n_jobs)
        self.predict = predict
        self.x = x
        self.background = background
        self.max_rows = max_rows

    def value_function(self, masks: np.ndarray) -> np.ndarray:
        k = self.background.shape[0]
        per_chunk = max(1, self.max_rows // k)  # bound the (coalitions x background) buffer
        out = []
        for start in range(0, masks.shape[0], per_chunk):
            chunk = masks[start : start + per_chunk]
            rows = np.where(chunk[:, None, :], self.x, self.background[None])
            pred = _to_numpy(self.predict(rows.reshape(-1, self.x.size)))
            if pred.shape != (rows.shape[0] * k,):
                raise ValueError(
                    f"predict must return one output per row, shape ({rows.shape[0] * k},); got "
                    f"{pred.shape} (pick one output column for multi-output models)"
                )
            out.append(pred.reshape(chunk.shape[0], k).mean(axis=1))
        return np.concatenate(out)


class DataValuationGame(Game):
    """Data valuation: ``U(S)`` = validation score of ``model`` trained on training points ``S``.

    ``model`` is a scikit-learn estimator (cloned for every coalition). ``scoring`` is ``None``
    (``model.score``), a scorer name for ``sklearn.metrics.get_scorer`` or a callable
    ``(fitted, X, y) -> float``. Fitting dominates, so set ``n_jobs`` to use the machine's cores (or
    a Dask/Ray joblib backend).

    The shapes are checked when the game is built, and the first call fits and scores the model on
    the whole training set with no error caught: a setup error (a validation set of the wrong width,
    a scorer that does not apply) raises there. That score is kept as ``U(training set)``, so the
    check costs no extra fit when the full coalition is queried (Adalina queries it first); with
    Adalina-All, which may never draw it, the check is one fit not counted in ``n_queries``. After that, a coalition the model cannot be trained
    or scored on (the empty one, a classifier seeing one class, fewer points than a k-NN's k: a
    ``ValueError`` from ``fit`` or the score) is worth ``default_score``, as in pyDVL.
    """

    def __init__(
        self,
        model: Any,
        X_train: np.ndarray,
        y_train: np.ndarray,
        X_val: np.ndarray,
        y_val: np.ndarray,
        *,
        scoring: str | Callable[..., float] | None = None,
        default_score: float = 0.0,
        n_jobs: int | None = None,
    ) -> None:
        X_train, y_train = np.asarray(X_train), np.asarray(y_train)
        X_val, y_val = np.asarray(X_val), np.asarray(y_val)
        if X_train.ndim != 2 or X_train.shape[0] != y_train.shape[0]:
            raise ValueError(
                "X_train must be 2-d with one row per entry of y_train; got X_train of shape "
                f"{X_train.shape} and y_train of shape {y_train.shape}"
            )
        if X_val.ndim != 2 or X_val.shape[1] != X_train.shape[1]:
            raise ValueError(
                f"X_val must have shape (rows, {X_train.shape[1]}) like X_train "
                f"{X_train.shape}; got {X_val.shape}"
            )
        if X_val.shape[0] != y_val.shape[0] or y_val.shape[1:] != y_train.shape[1:]:
            raise ValueError(
                f"y_val must have shape ({X_val.shape[0]},{y_train.shape[1:] or ''}) to match "
                f"X_val {X_val.shape} and y_train {y_train.shape}; got {y_val.shape}"
            )
        super().__init__(X_train.shape[0], n_jobs=n_jobs)
        self.model = model
        self.X_train = X_train
        self.y_train = y_train
        self.X_val = X_val
        self.y_val = y_val
        self.scoring = scoring
        self.default_score = float(default_score)
        self._full_score: float | None = None  # U(training set), from the first call's check

    def _fit_and_score(self, mask: np.ndarray) -> float:
        from sklearn.base import clone
        from sklearn.metrics import get_scorer

        fitted = clone(self.model).fit(self.X_train[mask], self.y_train[mask])
        if self.scoring is None:
            return float(fitted.score(self.X_val, self.y_val))
        if isinstance(self.scoring, str):
            return float(get_scorer(self.scoring)(fitted, self.X_val, self.y_val))
        return float(self.scoring(fitted, self.X_val, self.y_val))

    def _score_one(self, mask: np.ndarray) -> float:
        if not mask.any():
            return self.default_score
        if self._full_score is not None and mask.all():
            return self._full_score
        try:
            return self._fit_and_score(mask)
        except ValueError:
            # the whole training set worked (checked on the first call), so this is a subset
            # sklearn cannot use: a single class for a classifier, fewer points than a k-NN's k
            return self.default_score

    def __call__(self, masks: np.ndarray) -> np.ndarray:
        if self._full_score is None:
            # no error caught here: a bad validation set or scorer must not read as zeros
            self._full_score = self._fit_and_score(np.ones(self.n_players, dtype=bool))
        return super().__call__(masks)

    def value_function(self, masks: np.ndarray) -> np.ndarray:
        return np.array([self._score_one(m) for m in masks], dtype=float)
