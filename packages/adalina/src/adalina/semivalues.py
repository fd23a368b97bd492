"""Semi-values as cardinality weights, computed in log space.

A semi-value on ``n`` players is fixed by weights ``w_k, k = 0..n-1`` summing to one:

    phi_i = sum_k w_k * mean_{S ⊆ [n]\\{i}, |S| = k} [U(S ∪ {i}) - U(S)]

| family | ``w_k`` |
|---|---|
| Shapley | ``1/n`` |
| weighted Banzhaf ``p`` | ``C(n-1,k) p^k (1-p)^(n-1-k)`` |
| Beta Shapley ``(α, β)`` | ``C(n-1,k) B(k+β, n-1-k+α) / B(β, α)`` |

With the convention of the official code, ``Beta(16, 1)`` puts its mass on *small* coalitions and
Beta(1, 1) is the Shapley value. Binomials and Beta functions are never formed directly: the weights
are built from ``lgamma`` sums, so ``n`` in the thousands is exact to rounding.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Literal, Union

import numpy as np

Kind = Literal["shapley", "banzhaf", "beta"]
SemiValueLike = Union["SemiValue", str, float, tuple[float, float]]

_lgamma = np.frompyfunc(math.lgamma, 1, 1)


def _lgamma_array(x: np.ndarray) -> np.ndarray:
    return np.asarray(_lgamma(np.asarray(x, dtype=float)), dtype=float)


def _log_binom(n: int, k: np.ndarray) -> np.ndarray:
    return math.lgamma(n + 1) - _lgamma_array(k + 1) - _lgamma_array(n - k + 1)


def _log_beta(a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    return _lgamma_array(a) + _lgamma_array(b) - _lgamma_array(a + b)


def check_n_players(n: object) -> int:
    """``n`` as an int, or a ``ValueError``/``TypeError`` saying why it is not a player count."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"n must be an int (the number of players), got {type(n).__name__}")
    if n < 2:
        raise ValueError(
            f"n must be >= 2: semi-values need at least two players (sampled coalition sizes "
            f"are 1..n-1), got n={n}"
        )
    return int(n)


@dataclasses.dataclass(frozen=True)
class SemiValue:
    """A semi-value: Shapley, weighted Banzhaf ``p`` or Beta Shapley ``(alpha, beta)``.

    Build one with :meth:`shapley`, :meth:`banzhaf`, :meth:`beta_shapley` or :meth:`coerce`, which
    also accepts the official code's shorthands (``"shapley"``, ``"banzhaf"``, a float ``p``, a tuple
    ``(alpha, beta)``).
    """

    kind: Kind
    p: float | None = None
    alpha: float | None = None
    beta: float | None = None

    def __post_init__(self) -> None:
        if self.kind == "shapley":
            if (self.p, self.alpha, self.beta) != (None, None, None):
                raise ValueError("the Shapley value takes no parameters")
        elif self.kind == "banzhaf":
            if self.p is None or not (0.0 < float(self.p) < 1.0):
                raise ValueError(f"weighted Banzhaf needs 0 < p < 1, got p={self.p!r}")
            object.__setattr__(self, "p", float(self.p))
        elif self.kind == "beta":
            for name in ("alpha", "beta"):
                value = getattr(self, name)
                if value is None or not math.isfinite(float(value)) or float(value) <= 0:
                    raise ValueError(f"Beta Shapley needs {name} > 0 (finite), got {value!r}")
                object.__setattr__(self, name, float(value))
        else:
            raise ValueError(
                f"unknown semi-value kind {self.kind!r}; expected 'shapley', 'banzhaf' or 'beta'"
            )

    # -- constructors ------------------------------------------------------------------------------
    @staticmethod
    def shapley() -> SemiValue:
        return SemiValue("shapley")

    @staticmethod
    def banzhaf(p: float = 0.5) -> SemiValue:
        """Weighted Banzhaf value; ``p = 0.5`` is the Banzhaf value."""
        return SemiValue("banzhaf", p=p)

    @staticmethod
    def beta_shapley(alpha: float, beta: float) -> SemiValue:
        """Beta Shapley value (Kwon & Zou); ``(1, 1)`` is Shapley, ``(16, 1)`` favours small sets."""
        return SemiValue("beta", alpha=alpha, beta=beta)

    @staticmethod
    def coerce(spec: SemiValueLike) -> SemiValue:
        """A :class:`SemiValue` from the official code's shorthands.

        ``"shapley"``, ``"banzhaf"`` (p = 0.5), a float ``p`` in (0, 1) (weighted Banzhaf) or a
        pair ``(alpha, beta)`` (Beta Shapley; ``(1, 1)`` gives the Shapley value).
        """
        if isinstance(spec, SemiValue):
            return spec
        if isinstance(spec, str):
            key = spec.lower().replace("-", "_").replace(" ", "_")
            if key == "shapley":
                return SemiValue.shapley()
            if key == "banzhaf":
                return SemiValue.banzhaf(0.5)
            raise ValueError(
                f"unknown semi-value {spec!r}; expected 'shapley', 'banzhaf', a float p in (0, 1) "
                "for weighted Banzhaf, a pair (alpha, beta) for Beta Shapley, or a SemiValue"
            )
        if isinstance(spec, (float, np.floating)) and not isinstance(spec, bool):
            return SemiValue.banzhaf(float(spec))
        if isinstance(spec, Sequence) and len(spec) == 2:
            alpha, beta = (float(v) for v in spec)
            if alpha == 1.0 and beta == 1.0:
                return SemiValue.shapley()
            return SemiValue.beta_shapley(alpha, beta)
        raise TypeError(
            f"cannot read a semi-value from {spec!r} ({type(spec).__name__}); expected 'shapley', "
            "'banzhaf', a float p, a pair (alpha, beta) or a SemiValue"
        )

    # -- weights -----------------------------------------------------------------------------------
    def log_weights(self, n: int) -> np.ndarray:
        """``log w_k`` for ``k = 0..n-1`` (``-inf`` where a weight is exactly zero)."""
        n = check_n_players(n)
        k = np.arange(n, dtype=float)
        if self.kind == "shapley":
            return np.full(n, -math.log(n))
        if self.kind == "banzhaf":
            assert self.p is not None
            return _log_binom(n - 1, k) + k * math.log(self.p) + (n - 1 - k) * math.log1p(-self.p)
        assert self.alpha is not None and self.beta is not None
        return (
            _log_binom(n - 1, k)
            + _log_beta(k + self.beta, n - 1 - k + self.alpha)
            - _log_beta(self.beta, self.alpha)
        )

    def weights(self, n: int) -> np.ndarray:
        """Cardinality weights ``w_k, k = 0..n-1``; they sum to one."""
        return np.exp(self.log_weights(n))

    @property
    def is_symmetric(self) -> bool:
        """Whether ``w_k == w_{n-1-k}`` for every ``n`` (Shapley, Banzhaf 0.5, Beta(α, α))."""
        if self.kind == "shapley":
            return True
        if self.kind == "banzhaf":
            return self.p == 0.5
        return self.alpha == self.beta

    @property
    def name(self) -> str:
        """A short label: ``shapley``, ``banzhaf(0.3)``, ``beta(16,1)``."""
        if self.kind == "shapley":
            return "shapley"
        if self.kind == "banzhaf":
            return f"banzhaf({self.p:g})"
        return f"beta({self.alpha:g},{self.beta:g})"

    def __str__(self) -> str:
        return self.name


def paper_semivalues() -> list[SemiValue]:
    """The 18 semi-values of the paper's experiments (weighted Banzhaf 0.1..0.9, nine Beta)."""
    banzhaf = [SemiValue.banzhaf(round(0.1 * i, 1)) for i in range(1, 10)]
    pairs = [(16, 1), (4, 1), (1, 1), (1, 4), (1, 16), (16, 4), (2, 2), (8, 8), (4, 16)]
    return banzhaf + [SemiValue.coerce(pair) for pair in pairs]
