"""Adalina and the linear-space estimators, behind one ``approximate(budget, game)`` interface.

:class:`SemiValueApproximator` runs the query loop every estimator shares: shapiq's budget semantics
(every utility query counts, the empty and the full coalition included), batched game calls,
checkpoints for error-versus-budget curves and ``random_state``. A subclass says which coalitions to
query (``_draw``) and how to fold their utilities into its state (``_update``).

:class:`LinearSpaceEstimator` is the paper's linear-space framework: with ``a(S)`` the sample vectors
of :mod:`adalina.sampling` and ``m`` sampled coalitions,

    phi_hat(γ) = (1/m) sum_j a(S_j) (U(S_j) - γ) + [(U([n]) - γ) w_{n-1} - (U(∅) - γ) w_0] 1,

unbiased for any fixed ``γ``. :class:`Adalina` sets ``γ`` to the running mean of the sampled
utilities, the minimiser of the dominant variance term ``n^2 Z^2 E_q[(U - γ)^2]`` (``||a(S)||`` is
constant), keeping ``2n + 2`` floats of state.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import numpy as np

from adalina.cache import CoalitionCache, coalition_keys
from adalina.games import GameLike, evaluate
from adalina.sampling import (
    draw_coalitions,
    sample_vector_coefficients,
    sampling_distribution,
    size_support,
)
from adalina.semivalues import SemiValue, SemiValueLike, check_n_players

RandomState: TypeAlias = int | np.random.Generator | np.random.RandomState | None
StoppingRule: TypeAlias = Callable[[np.ndarray | None, int], bool]
GAMMA_RULES = ("adaptive", "zero", "midpoint", "empty")
BUDGET_RULES = ("draws", "evaluations")
#: in ``budget="evaluations"``, stop after this many draws per unit of budget if too few are new
MAX_DRAWS_PER_EVALUATION = 100


class NotFittedError(ValueError, AttributeError):
    """An estimate was asked for before enough coalitions were seen (as in scikit-learn)."""


@dataclasses.dataclass(frozen=True)
class SemiValueResult:
    """What :meth:`SemiValueApproximator.approximate` returns.

    ``n_queries`` counts the utility evaluations made (the game's rows), ``n_draws`` the sampled
    coalitions the estimate averages over (more than ``n_queries`` under ``budget="evaluations"``,
    where a coalition drawn twice is evaluated once). ``stderr`` is the standard error of each value
    (``None`` only before two samples); ``values ± 1.96 stderr`` is a 95 % interval.
    ``trajectory[j]`` is the estimate after ``checkpoint_queries[j]`` queries (``None`` without
    checkpoints); ``gamma`` is the control variate used; ``baseline_value`` is ``U(∅)`` when it was
    queried; ``converged`` says whether the stopping rule ended the run.
    """

    values: np.ndarray
    n_queries: int
    estimator: str
    gamma: float | None = None
    stderr: np.ndarray | None = None
    checkpoint_queries: np.ndarray | None = None
    trajectory: np.ndarray | None = None
    n_draws: int | None = None
    baseline_value: float | None = None
    converged: bool = False
    semivalue: Any = None

    @property
    def std_error(self) -> np.ndarray | None:
        """The 0.1 name of :attr:`stderr`."""
        return self.stderr

    def to_interaction_values(self) -> Any:
        """This result as a ``shapiq.InteractionValues`` (first order; needs shapiq)."""
        from adalina.interop import to_interaction_values

        return to_interaction_values(self)


def _same(value: Any, default: Any) -> bool:
    # arrays (a size distribution) never equal a default of None
    return value is default or (
        not isinstance(value, np.ndarray) and type(value) is type(default) and value == default
    )


def _check_random_state(random_state: RandomState) -> np.random.Generator:
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        # scikit-learn's convention: draw from the (shared, mutable) RandomState, so two runs on
        # one instance differ, as with sklearn estimators
        return np.random.default_rng(random_state.randint(0, 2**32, size=4, dtype=np.uint64))
    if random_state is None or (
        isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool)
    ):
        return np.random.default_rng(random_state)
    raise TypeError(
        "random_state must be None, an int, a numpy Generator or a numpy RandomState, got "
        f"{type(random_state).__name__}"
    )


def _check_coalitions(coalitions: Any, values: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    masks = np.asarray(coalitions)
    if masks.dtype != bool:
        raise TypeError(f"coalitions must be a boolean matrix, got dtype {masks.dtype}")
    if masks.ndim != 2 or masks.shape[1] != n:
        raise ValueError(f"coalitions must have shape (batch, {n}), got {masks.shape}")
    values = np.asarray(values.detach().cpu() if hasattr(values, "detach") else values, dtype=float)
    if values.shape != (masks.shape[0],):
        raise ValueError(
            f"values must have shape ({masks.shape[0]},), one per coalition; got {values.shape}"
        )
    if not np.all(np.isfinite(values)):
        first = int(np.flatnonzero(~np.isfinite(values))[0])
        raise ValueError(
            f"non-finite value {values[first]} for coalition {np.flatnonzero(masks[first]).tolist()}"
        )
    return masks, values


class SemiValueApproximator:
    """Base class: estimates a semi-value of an ``n``-player game from ``budget`` utility queries.

    Parameters are stored unchanged and checked when the estimator is used (scikit-learn style).
    Learned attributes: ``values_``, ``n_queries_``, ``checkpoint_queries_``, ``trajectory_``.
    """

    #: queries made before the first sample (the empty and the full coalition)
    n_extreme_queries = 2
    #: label written to :class:`SemiValueResult`
    name = "approximator"
    #: queries in one sampling unit (a permutation costs n - 1); batches hold whole units
    _unit = 1

    def __init__(
        self,
        n: int,
        semivalue: SemiValueLike = "shapley",
        *,
        budget: str = "draws",
        stopping: StoppingRule | None = None,
        batch_size: int = 100,
        random_state: RandomState = None,
    ) -> None:
        self.n = n
        self.semivalue = semivalue
        self.budget = budget
        self.stopping = stopping
        self.batch_size = batch_size
        self.random_state = random_state

    # -- parameters (scikit-learn's get_params / set_params / repr) --------------------------------
    @classmethod
    def _param_names(cls) -> list[str]:
        signature = inspect.signature(cls.__init__)
        return [p for p in signature.parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's parameters as stored; ``deep`` adds ``name__sub`` entries for
        parameters that have ``get_params`` themselves (scikit-learn's convention)."""
        params = {name: getattr(self, name) for name in self._param_names()}
        if deep:
            for name, value in list(params.items()):
                if hasattr(value, "get_params") and not isinstance(value, type):
                    params.update({f"{name}__{k}": v for k, v in value.get_params().items()})
        return params

    def set_params(self, **params: Any) -> SemiValueApproximator:
        """Set constructor parameters (checked when the estimator next runs); returns ``self``."""
        valid = self._param_names()
        nested: dict[str, dict[str, Any]] = {}
        for key, value in params.items():
            name, _, sub = key.partition("__")
            if name not in valid:
                raise ValueError(
                    f"invalid parameter {name!r} for {type(self).__name__}; valid parameters: "
                    f"{', '.join(valid)}"
                )
            if sub:
                nested.setdefault(name, {})[sub] = value
            else:
                setattr(self, name, value)
        for name, sub_params in nested.items():
            getattr(self, name).set_params(**sub_params)
        if any(key.partition("__")[0] != "stopping" for key in params):
            # a stream drawn under the old parameters cannot continue under new ones: the next
            # sample_coalitions / partial_fit checks the new parameters and starts a fresh stream
            self.__dict__.pop("_rng", None)
        return self

    def __repr__(self) -> str:
        defaults = inspect.signature(type(self).__init__).parameters
        shown = [
            f"{name}={value!r}"
            for name, value in self.get_params(deep=False).items()
            if name == "n" or not _same(value, defaults[name].default)
        ]
        return f"{type(self).__name__}({', '.join(shown)})"

    # -- checks ------------------------------------------------------------------------------------
    def _validate(self) -> None:
        """Check the parameters; cache the semi-value and the player count."""
        self._n = check_n_players(self.n)
        self._sv = SemiValue.coerce(self.semivalue)
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, (int, np.integer)):
            raise TypeError(f"batch_size must be an int, got {type(self.batch_size).__name__}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.budget not in BUDGET_RULES:
            raise ValueError(
                f"budget must be 'draws' (every sampled coalition is a query) or 'evaluations' "
                f"(distinct coalitions, shapiq's count), got {self.budget!r}"
            )
        if self.stopping is not None and not callable(self.stopping):
            raise TypeError(
                "stopping must be None or a rule called as rule(stderr, n_samples) -> bool, such "
                f"as adalina.AbsoluteStandardError; got {type(self.stopping).__name__}"
            )

    @property
    def min_budget(self) -> int:
        """The fewest queries this estimator can run on (the extremes plus one sample)."""
        return self.n_extreme_queries + 1

    def _check_budget(self, budget: Any) -> int:
        if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)):
            raise TypeError(f"budget must be an int (number of utility queries), got {budget!r}")
        if budget < self.min_budget:
            raise ValueError(
                f"{type(self).__name__} needs a budget of at least {self.min_budget} queries "
                f"(n={self._n}), got budget={budget}"
            )
        if budget < self._n:
            warnings.warn(
                f"budget={budget} is below the number of players n={self._n}: expect estimates "
                "dominated by noise",
                stacklevel=3,
            )
        return int(budget)

    def _checkpoint_stops(self, budget: int, checkpoints: int | Sequence[int] | None) -> list[int]:
        if checkpoints is None:
            return [budget]
        if isinstance(checkpoints, bool):
            raise TypeError("checkpoints must be a count or a sequence of query totals, not a bool")
        if isinstance(checkpoints, (int, np.integer)):
            if checkpoints < 1:
                raise ValueError(f"checkpoints must be >= 1, got {checkpoints}")
            stops = np.linspace(budget / checkpoints, budget, int(checkpoints)).round()
            stops = [int(s) for s in stops if s >= self.min_budget]
        else:
            stops = sorted(int(s) for s in checkpoints)
            bad = [s for s in stops if not self.min_budget <= s <= budget]
            if bad:
                raise ValueError(
                    f"checkpoints must lie in [{self.min_budget}, budget={budget}], got {bad}"
                )
        return sorted(set(stops) | {budget})

    # -- hooks -------------------------------------------------------------------------------------
    def _reset(self) -> None:
        """Forget every coalition seen."""
        self._rng = _check_random_state(self.random_state)
        self.n_queries_ = 0
        self.n_draws_ = 0

    def _extreme_coalitions(self) -> np.ndarray:
        n = self._n
        if self.n_extreme_queries == 0:
            return np.zeros((0, n), dtype=bool)
        return np.stack([np.zeros(n, dtype=bool), np.ones(n, dtype=bool)])

    def _draw(self, k: int) -> np.ndarray:
        """At most ``k`` coalitions to query next (fewer only at the end of the budget)."""
        raise NotImplementedError

    def _update(self, masks: np.ndarray, values: np.ndarray) -> None:
        raise NotImplementedError

    def _estimate(self) -> np.ndarray:
        raise NotImplementedError

    def _gamma(self) -> float | None:
        return None

    def _std_error(self) -> np.ndarray | None:
        return None

    # -- public ------------------------------------------------------------------------------------
    @property
    def values_(self) -> np.ndarray:
        """The current estimate of the semi-value, one entry per player."""
        if getattr(self, "n_queries_", 0) == 0:
            raise NotFittedError(
                f"this {type(self).__name__} has seen no coalitions; call approximate or partial_fit"
            )
        return self._estimate()

    @property
    def stderr_(self) -> np.ndarray:
        """Standard error of each entry of ``values_`` (``values_ ± 1.96 stderr_``: 95 %)."""
        se = self._std_error() if getattr(self, "n_queries_", 0) else None
        if se is None:
            raise NotFittedError("standard errors need at least two sampled coalitions")
        return se

    @property
    def std_error_(self) -> np.ndarray:
        """The 0.1 name of :attr:`stderr_`."""
        return self.stderr_

    def approximate(
        self,
        budget: int,
        game: GameLike,
        *,
        checkpoints: int | Sequence[int] | None = None,
    ) -> SemiValueResult:
        """Estimate the semi-value of ``game`` from ``budget`` utility queries.

        ``game`` maps a boolean ``(batch, n)`` coalition matrix to ``(batch,)`` utilities (numpy,
        torch or list); a shapiq ``Game`` works as it is. ``budget`` counts every sampled
        coalition (``budget="draws"``, the paper's count) or distinct evaluated coalitions
        (``budget="evaluations"``, shapiq's count), the empty and the full coalition included.
        With a ``stopping`` rule the run ends as soon as the rule holds. ``checkpoints`` (a count of
        evenly spaced query totals, or the totals themselves) records the estimate along the way
        for error-versus-budget curves.
        """
        self._validate()
        self._check_game(game)
        budget = self._check_budget(budget)
        stops = self._checkpoint_stops(budget, checkpoints)
        self._reset()
        cache = CoalitionCache() if self.budget == "evaluations" else None
        max_draws = MAX_DRAWS_PER_EVALUATION * budget
        trajectory: list[np.ndarray] = []
        reached: list[int] = []
        pending = self._extreme_coalitions()
        converged = False
        for stop in stops:
            while self.n_queries_ < stop and not converged and self.n_draws_ < max_draws:
                masks, values, cost = self._next_batch(game, stop, pending, cache)
                pending = pending[:0]
                if masks.shape[0] == 0:
                    break  # the rest of the budget cannot buy a whole sampling unit
                self._update(masks, values)
                self.n_queries_ += cost
                self.n_draws_ += masks.shape[0]
                converged = self._converged()
            if checkpoints is not None and (not reached or reached[-1] != self.n_queries_):
                reached.append(self.n_queries_)
                trajectory.append(self._estimate())
        if self.n_queries_ < budget and self.n_draws_ >= max_draws:
            warnings.warn(
                f"budget={budget} distinct coalitions were not reached in {max_draws} draws "
                f"({self.n_queries_} evaluated): the game has few coalitions (n={self._n}); use "
                "exact_semivalue for budgets near 2^n",
                stacklevel=2,
            )
        self.converged_ = converged
        self.checkpoint_queries_ = np.asarray(reached) if checkpoints is not None else None
        self.trajectory_ = np.asarray(trajectory) if checkpoints is not None else None
        return SemiValueResult(
            values=self.values_,
            n_queries=self.n_queries_,
            estimator=self.name,
            gamma=self._gamma(),
            stderr=self._std_error(),
            checkpoint_queries=self.checkpoint_queries_,
            trajectory=self.trajectory_,
            n_draws=self.n_draws_,
            baseline_value=self._baseline_value(),
            converged=converged,
            semivalue=self._sv,
        )

    def _check_game(self, game: GameLike) -> None:
        players = getattr(game, "n_players", None)
        if isinstance(players, (int, np.integer)) and int(players) != self._n:
            raise ValueError(
                f"the game has n_players={players} but {type(self).__name__} was built for "
                f"n={self._n}"
            )

    def _next_batch(
        self,
        game: GameLike,
        stop: int,
        pending: np.ndarray,
        cache: CoalitionCache | None,
    ) -> tuple[np.ndarray, np.ndarray, int]:
        """The next coalitions, their utilities and what they cost against the budget."""
        room = stop - self.n_queries_
        if cache is None:  # every draw is a query
            take = min(max(self.batch_size, self._unit), room)
            drawn = self._draw(max(take - pending.shape[0], 0))
            masks = np.concatenate([pending, drawn]) if pending.size else drawn
            return masks, evaluate(game, masks) if masks.size else np.zeros(0), masks.shape[0]
        drawn = self._draw(max(self.batch_size, self._unit))
        masks = np.concatenate([pending, drawn]) if pending.size else drawn
        keys = coalition_keys(masks)
        fresh = cache.new_rows(keys)
        if fresh.size > room:
            # keep the rows up to the room-th new coalition, in whole sampling units
            lead = pending.shape[0]
            cut = int(fresh[room - 1]) + 1
            cut = lead + (cut - lead) // self._unit * self._unit if cut > lead else cut
            masks, keys = masks[:cut], keys[:cut]
            fresh = fresh[fresh < cut]
        if fresh.size:
            new_keys = [keys[j] for j in fresh]
            cache.store(new_keys, evaluate(game, masks[fresh]))
        return masks, cache.lookup(keys), int(fresh.size)

    def _converged(self) -> bool:
        if self.stopping is None:
            return False
        return bool(self.stopping(self._std_error(), self._samples_seen()))

    def _samples_seen(self) -> int:
        return int(getattr(self, "_m", self.n_draws_))

    def _baseline_value(self) -> float | None:
        return None


class _ExtremesMixin:
    """Keeps ``U(∅)`` and ``U([n])`` (centred by the first utility seen) and drops them from a batch."""

    _n: int
    _u_empty: float | None
    _u_full: float | None
    _ref: float | None

    def _take_extremes(
        self, masks: np.ndarray, values: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        if self._ref is None and values.size:
            self._ref = float(values[0])
        centred = values - (self._ref or 0.0)
        sizes = masks.sum(axis=1)
        empty, full = sizes == 0, sizes == self._n
        if empty.any():
            self._u_empty = float(centred[empty][-1])
        if full.any():
            self._u_full = float(centred[full][-1])
        keep = ~(empty | full)
        return masks[keep], centred[keep]

    def _baseline_value(self) -> float | None:
        return None if self._u_empty is None else self._u_empty + (self._ref or 0.0)

    def _extremes(self) -> tuple[float, float]:
        if self._u_empty is None or self._u_full is None:
            raise NotFittedError("U(∅) and U([n]) have not been queried yet")
        return self._u_empty, self._u_full


class LinearSpaceEstimator(_ExtremesMixin, SemiValueApproximator):
    """The linear-space estimator ``phi_hat(γ)`` with a fixed ``γ`` (unbiased) or Adalina's ``γ = Ū``.

    Parameters
    ----------
    n : number of players (>= 2).
    semivalue : a :class:`~adalina.semivalues.SemiValue` or a shorthand (``"shapley"``, ``p``,
        ``(alpha, beta)``).
    gamma : ``"adaptive"`` (running mean of the sampled utilities: Adalina), ``"zero"``,
        ``"midpoint"`` (``(U([n]) + U(∅))/2``), ``"empty"`` (``U(∅)``) or a number.
    include_extremes : sample sizes ``0..n`` and skip the two extreme queries (Adalina-All).
    paired : query each sampled coalition together with its complement; only valid for a
        symmetric semi-value, a symmetric size distribution and a fixed ``γ``.
    size_distribution : ``q_s`` over the sampled sizes; ``None`` is Adalina's optimal ``q``.
    budget : ``"draws"`` (every sampled coalition costs one query; the paper's count, O(n) memory)
        or ``"evaluations"`` (distinct coalitions, shapiq's count: a repeated draw is served from a
        cache of evaluated coalitions).
    stopping : a rule ``rule(stderr, n_samples) -> bool`` such as
        :class:`~adalina.stopping.AbsoluteStandardError`; ``approximate`` stops once it holds.
    batch_size : coalitions per game call.
    random_state : seed or numpy Generator; the same seed gives the same result.
    """

    name = "linear"

    def __init__(
        self,
        n: int,
        semivalue: SemiValueLike = "shapley",
        *,
        gamma: str | float = "zero",
        include_extremes: bool = False,
        paired: bool = False,
        size_distribution: np.ndarray | None = None,
        budget: str = "draws",
        stopping: StoppingRule | None = None,
        batch_size: int = 100,
        random_state: RandomState = None,
    ) -> None:
        super().__init__(
            n,
            semivalue,
            budget=budget,
            stopping=stopping,
            batch_size=batch_size,
            random_state=random_state,
        )
        self.gamma = gamma
        self.include_extremes = include_extremes
        self.paired = paired
        self.size_distribution = size_distribution

    @property
    def n_extreme_queries(self) -> int:  # type: ignore[override]
        return 0 if self.include_extremes else 2

    @property
    def min_budget(self) -> int:
        # Adalina-All needs two samples: with one, U - Ū is identically zero.
        return 2 if self.include_extremes else 3

    def _q(self) -> np.ndarray:
        if self.size_distribution is None:
            return sampling_distribution(
                self._n, self._sv, include_extremes=bool(self.include_extremes)
            )
        return np.asarray(self.size_distribution, dtype=float)

    def _coefficients(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return sample_vector_coefficients(
            self._n, self._sv, q, include_extremes=bool(self.include_extremes)
        )

    def _validate(self) -> None:
        super()._validate()
        gamma = self.gamma
        if isinstance(gamma, str):
            if gamma not in GAMMA_RULES:
                raise ValueError(f"gamma must be one of {GAMMA_RULES} or a number, got {gamma!r}")
            if self.include_extremes and gamma in ("midpoint", "empty"):
                raise ValueError(
                    f"gamma={gamma!r} needs U([n]) and U(∅), which include_extremes=True does "
                    "not query; use 'adaptive', 'zero' or a number"
                )
        elif isinstance(gamma, bool) or not isinstance(gamma, (int, float, np.number)):
            raise TypeError(f"gamma must be a string rule or a number, got {gamma!r}")
        elif not math.isfinite(float(gamma)):
            raise ValueError(f"gamma must be finite, got {gamma!r}")
        q = self._q()
        sizes = size_support(self._n, bool(self.include_extremes))
        self._sizes = sizes
        self._inside, self._outside = self._coefficients(q)  # also checks q
        self._size_q = q
        if self.paired:
            if not self._sv.is_symmetric:
                raise ValueError(
                    f"paired sampling is only valid for a symmetric semi-value (Shapley, Banzhaf "
                    f"0.5, Beta(a, a)); got {self._sv.name}"
                )
            if gamma == "adaptive":
                raise ValueError(
                    "paired sampling is not valid with gamma='adaptive'; use a fixed gamma"
                )
            if not np.allclose(q, q[::-1], rtol=1e-9, atol=0):
                raise ValueError("paired sampling needs a size distribution with q_s = q_(n-s)")
        log_w = self._sv.log_weights(self._n)
        self._w_first, self._w_last = math.exp(log_w[0]), math.exp(log_w[-1])

    def _reset(self) -> None:
        super()._reset()
        n = self._n
        # Utilities are accumulated relative to the first one seen (``_ref``): a constant game then
        # gives exactly zero under Adalina, and large offsets do not cost precision.
        self._ref: float | None = None
        self._sum_a = np.zeros(n)
        self._sum_au = np.zeros(n)
        # second moments sum a_i^2 u^k, k = 0, 1, 2, for standard errors (still O(n))
        self._sum_au2 = np.zeros(n)
        self._sum_a2 = np.zeros((n, 3))
        self._sum_u = 0.0
        self._sum_u2 = 0.0
        self._m = 0
        self._u_empty: float | None = None
        self._u_full: float | None = None
        self._issued: Counter[bytes] = Counter()

    def sample_coalitions(self, m: int) -> np.ndarray:
        """``m`` coalitions from this estimator's sampling distribution (for :meth:`partial_fit`).

        The estimator remembers the coalitions it issued until they come back through
        :meth:`partial_fit`; only those (and the extremes) are accepted there. That record is the
        one part of the streaming state that is not O(n): about ``n/8 + 60..90`` bytes per issued,
        not-yet-returned coalition (5.2 MiB for 50 000 unreturned draws at n = 200). Return the
        coalitions, or call :meth:`forget_issued` for draws that will never come back.
        """
        if not hasattr(self, "_rng"):
            self._validate()
            self._reset()
        masks = self._draw(m)
        self._issued.update(coalition_keys(masks))
        return masks

    def forget_issued(self, coalitions: np.ndarray | None = None) -> LinearSpaceEstimator:
        """Drop issued coalitions from the record :meth:`partial_fit` checks; returns ``self``.

        With ``coalitions`` (rows issued by :meth:`sample_coalitions`, e.g. ones whose evaluation
        failed) only those are forgotten; with ``None`` the whole record is freed. A forgotten
        coalition is then refused by :meth:`partial_fit`, so the running estimate is unchanged.
        """
        if not hasattr(self, "_issued"):
            return self
        if coalitions is None:
            self._issued = Counter()
            return self
        masks = np.asarray(coalitions)
        if masks.dtype != bool or masks.ndim != 2 or masks.shape[1] != self._n:
            raise ValueError(
                f"coalitions must be a boolean (m, {self._n}) array, got dtype {masks.dtype} "
                f"and shape {masks.shape}"
            )
        self._issued.subtract(Counter(coalition_keys(masks)))
        self._issued = +self._issued  # drop spent keys (and never go negative)
        return self

    def initial_coalitions(self) -> np.ndarray:
        """The extreme coalitions (empty, full) to evaluate once, or none for Adalina-All."""
        if not hasattr(self, "_n"):
            self._validate()
        return self._extreme_coalitions()

    def _draw(self, k: int) -> np.ndarray:
        if not self.paired:
            return draw_coalitions(self._rng, k, self._n, self._size_q, self._sizes)
        half = draw_coalitions(self._rng, (k + 1) // 2, self._n, self._size_q, self._sizes)
        both = np.empty((2 * half.shape[0], self._n), dtype=bool)
        both[0::2], both[1::2] = half, ~half
        return both[:k]

    def _claim_issued(self, masks: np.ndarray) -> None:
        """Check that every sampled row was issued by :meth:`sample_coalitions`, then forget them."""
        sizes = masks.sum(axis=1)
        sampled = masks if self.include_extremes else masks[(sizes > 0) & (sizes < self._n)]
        wanted = Counter(coalition_keys(sampled))
        for key, count in wanted.items():
            if self._issued[key] < count:
                row = np.unpackbits(np.frombuffer(key, dtype=np.uint8))[: self._n].astype(bool)
                raise ValueError(
                    f"coalition {np.flatnonzero(row).tolist()} was not drawn by this estimator's "
                    "sample_coalitions (or was passed more often than drawn): the estimate "
                    "weights each sample by 1/P(S) under its own sampler, so foreign coalitions "
                    "would bias it. Draw with sample_coalitions, or use exact_semivalue / a "
                    "TabularGame for a fixed design"
                )
        self._issued.subtract(wanted)
        self._issued = +self._issued  # drop the spent keys

    def partial_fit(self, coalitions: np.ndarray, values: np.ndarray) -> LinearSpaceEstimator:
        """Fold in utilities of coalitions drawn by :meth:`sample_coalitions` (streaming, O(n)).

        Rows with every player absent or present are taken as ``U(∅)`` and ``U([n])`` (unless
        ``include_extremes``, where they are ordinary samples); evaluate :meth:`initial_coalitions`
        once. Any other row must have been issued by :meth:`sample_coalitions` (in any order and
        any split; a foreign coalition raises ``ValueError``). Any split of a stream into calls
        gives the one-shot result up to rounding. With a ``stopping`` rule, ``converged_`` says
        whether it holds.
        """
        if not hasattr(self, "_rng"):
            self._validate()
            self._reset()
        masks, values = _check_coalitions(coalitions, values, self._n)
        self._claim_issued(masks)
        self._update(masks, values)
        self.n_queries_ += masks.shape[0]
        self.n_draws_ += masks.shape[0]
        self.converged_ = self._converged()
        return self

    def _update(self, masks: np.ndarray, values: np.ndarray) -> None:
        if values.size == 0:
            return
        if self.include_extremes:  # the extremes are ordinary samples
            if self._ref is None:
                self._ref = float(values[0])
            centred = values - self._ref
        else:
            masks, centred = self._take_extremes(masks, values)
        # a(S) = 1_S (inside_s + outside_s) - outside_s: one pass over the coalitions serves both
        # sums without building the (batch, n) matrix of sample vectors
        # and a_i(S)^2 = 1_S (inside_s^2 - outside_s^2) + outside_s^2 likewise
        sizes = masks.sum(axis=1)
        inside, outside = self._inside[sizes], self._outside[sizes]
        both, base = inside + outside, outside
        diff, base2 = inside**2 - outside**2, outside**2
        powers = np.stack([np.ones_like(centred), centred, centred**2], axis=1)
        sums = masks.T.astype(float) @ np.column_stack(
            [both[:, None] * powers, diff[:, None] * powers]
        )
        self._sum_a += sums[:, 0] - base.sum()
        self._sum_au += sums[:, 1] - float(base @ centred)
        self._sum_au2 += sums[:, 2] - float(base @ centred**2)
        self._sum_a2 += sums[:, 3:] + base2 @ powers
        self._sum_u += float(centred.sum())
        self._sum_u2 += float(centred @ centred)
        self._m += masks.shape[0]

    def _centred_gamma(self) -> float:
        ref = self._ref if self._ref is not None else 0.0
        if self.gamma == "adaptive":
            return self._sum_u / self._m
        if self.gamma == "zero":
            return -ref
        if self.gamma == "midpoint":
            assert self._u_empty is not None and self._u_full is not None
            return 0.5 * (self._u_empty + self._u_full)
        if self.gamma == "empty":
            assert self._u_empty is not None
            return self._u_empty
        return float(self.gamma) - ref

    def _estimate(self) -> np.ndarray:
        if self._m == 0:
            raise NotFittedError("no sampled coalition seen yet (only extremes)")
        if not self.include_extremes and (self._u_empty is None or self._u_full is None):
            raise NotFittedError(
                "U(∅) and U([n]) are needed: pass initial_coalitions() to partial_fit"
            )
        g = self._centred_gamma()
        phi = (self._sum_au - self._sum_a * g) / self._m
        if not self.include_extremes:
            assert self._u_empty is not None and self._u_full is not None
            phi = phi + ((self._u_full - g) * self._w_last - (self._u_empty - g) * self._w_first)
        return phi

    def _gamma(self) -> float | None:
        if self._m == 0:
            return None
        return self._centred_gamma() + (self._ref or 0.0)

    def _std_error(self) -> np.ndarray | None:
        # The estimate is a smooth function of sample means, so its standard error is that of the
        # mean of the per-sample influence terms psi = a(S)(U - γ) - k U (the delta method):
        # k = 0 for a fixed γ; for Adalina's plug-in γ = Ū, k = -dphi/dŪ = Ā + w_{n-1} - w_0.
        # E[Ā] = -(w_{n-1} - w_0), so k = O(1/sqrt(m)) and the term matters only at small m
        # (0.1 dropped it). All the moments needed are O(n) running sums.
        if self._m < 2:
            return None
        m, g = self._m, self._centred_gamma()
        s0, s1, s2 = self._sum_a2.T
        k = np.zeros(self._n)
        if self.gamma == "adaptive":
            k = self._sum_a / m + (0.0 if self.include_extremes else self._w_last - self._w_first)
        mean_sq = (
            (s2 - 2 * g * s1 + g * g * s0)
            - 2 * k * (self._sum_au2 - g * self._sum_au)
            + k * k * self._sum_u2
        ) / m
        mean = (self._sum_au - self._sum_a * g - k * self._sum_u) / m
        var = np.maximum(mean_sq - mean**2, 0.0) * m / (m - 1)
        return np.sqrt(var / m)

    @property
    def gamma_(self) -> float:
        """The control variate ``γ`` in use (Adalina: the running mean of sampled utilities)."""
        gamma = self._gamma() if hasattr(self, "_m") else None
        if gamma is None:
            raise NotFittedError(f"this {type(self).__name__} has seen no sampled coalitions")
        return gamma


class Adalina(LinearSpaceEstimator):
    """Adalina: linear-space semi-value estimation with the adaptive ``γ = Ū`` (the paper's method).

    ``include_extremes=True`` is the Adalina-All variant (sizes ``0..n`` sampled, no extreme
    queries). A fixed ``gamma`` turns it into the unbiased linear estimator of the same framework.
    O(n) memory; ``approximate`` makes exactly ``budget`` queries, ``m = budget - 2`` of them sampled
    (``budget`` with ``include_extremes``).

    Example
    -------
    >>> import numpy as np
    >>> from adalina import Adalina
    >>> v = np.arange(6.0)
    >>> game = lambda masks: masks @ v + 0.1 * masks.sum(1) ** 2
    >>> result = Adalina(6, "shapley", random_state=0).approximate(600, game)
    >>> result.n_queries
    600
    """

    def __init__(
        self,
        n: int,
        semivalue: SemiValueLike = "shapley",
        *,
        gamma: str | float = "adaptive",
        include_extremes: bool = False,
        paired: bool = False,
        budget: str = "draws",
        stopping: StoppingRule | None = None,
        batch_size: int = 100,
        random_state: RandomState = None,
    ) -> None:
        super().__init__(
            n,
            semivalue,
            gamma=gamma,
            include_extremes=include_extremes,
            paired=paired,
            budget=budget,
            stopping=stopping,
            batch_size=batch_size,
            random_state=random_state,
        )

    @property
    def name(self) -> str:  # type: ignore[override]
        base = "adalina-all" if self.include_extremes else "adalina"
        return base if self.gamma == "adaptive" else f"{base}(gamma={self.gamma})"


class LinearApprox(LinearSpaceEstimator):
    """The non-adaptive linear-space estimator with a fixed ``γ`` (``linearAppr`` in the official
    code): unbiased for every ``γ``; ``size_distribution`` replaces Adalina's ``q``."""

    name = "linear-fixed-gamma"


class MSRProb(LinearSpaceEstimator):
    """MSR-Prob (regression-adjusted estimator, arXiv 2506.11849, Eq. 3): Adalina-All's sampling with
    ``γ = 0``."""

    name = "msr-prob"

    def __init__(
        self,
        n: int,
        semivalue: SemiValueLike = "shapley",
        *,
        budget: str = "draws",
        stopping: StoppingRule | None = None,
        batch_size: int = 100,
        random_state: RandomState = None,
    ) -> None:
        super().__init__(
            n,
            semivalue,
            gamma=0.0,
            include_extremes=True,
            budget=budget,
            stopping=stopping,
            batch_size=batch_size,
            random_state=random_state,
        )
