"""Validation of the arrays of an adaptive experiment, with errors that name the bad argument."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import numpy as np

from ppai.problems import Array

PROPENSITY_FLOOR = 1e-3


@dataclasses.dataclass(frozen=True)
class AdaptiveData:
    """A validated experiment: T labeled rounds, N unlabeled contexts, K arms.

    ``pi`` is the propensity of the played arm, ``f`` the prediction for the played arm, ``f_u`` the
    ``(N, K)`` predictions on the pool, or the ``(N,)`` predictions for the one arm ``pool_arm`` when
    they were given as a vector (read them with :meth:`pool_pred`), ``f_all`` the ``(T, K)``
    predictions for every arm on the labeled contexts when they were given.
    """

    X: Array | None
    A: np.ndarray
    Y: Array
    pi: Array
    f: Array
    X_u: Array | None
    f_u: Array
    K: int
    f_all: Array | None = None
    pool_arm: int | None = None

    def pool_pred(self, arm: int) -> Array:
        """The pool's predictions for ``arm`` (length N), or a ValueError when none were given."""
        if self.pool_arm is None:
            return self.f_u[:, arm]
        if arm != self.pool_arm:
            raise ValueError(
                f"pred_unlabeled holds predictions for arm {self.pool_arm} only (a vector); arm "
                f"{arm} needs them too: pass an (N, K) matrix"
            )
        return self.f_u

    @property
    def T(self) -> int:
        return int(self.Y.shape[0])

    @property
    def N(self) -> int:
        return int(self.f_u.shape[0])


def as_float_array(value: Any, name: str, ndim: tuple[int, ...]) -> Array:
    """``value`` as a finite float array with one of the allowed ``ndim``s."""
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric array, got {type(value).__name__}") from exc
    # Real numbers only: a float cast would drop an imaginary part or parse strings silently.
    if raw.dtype.kind not in "biuf":
        raise TypeError(
            f"{name} must be a real numeric array (bool, int or float), got dtype {raw.dtype}"
        )
    arr = raw.astype(float, copy=False)
    if arr.ndim not in ndim:
        dims = " or ".join(f"{d}-D" for d in ndim)
        raise ValueError(f"{name} must be {dims}, got shape {arr.shape}")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ValueError(
            f"{name} has {int(bad.sum())} NaN or infinite value(s) "
            f"(first at index {tuple(int(i) for i in np.argwhere(bad)[0])}); drop or impute them"
        )
    return arr


def check_alpha(alpha: float) -> float:
    """``alpha`` as a float, or a ValueError when it is not in (0, 1)."""
    if not isinstance(alpha, (int, float, np.floating)) or not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    return float(alpha)


def check_floor(floor: float) -> float:
    """``propensity_floor`` as a float in [0, 1), or a ValueError naming it."""
    if not isinstance(floor, (int, float, np.floating)) or not 0.0 <= float(floor) < 1.0:
        raise ValueError(f"propensity_floor must lie in [0, 1), got {floor!r}")
    return float(floor)


def check_propensities(pi: Array, floor: float) -> None:
    """Propensities of the played arms must lie in (0, 1]; below ``floor`` only warns."""
    bad = (pi <= 0) | (pi > 1)
    if bad.any():
        i = int(np.argmax(bad))
        why = (
            "a probability cannot exceed 1"
            if pi[i] > 1
            else "a played arm cannot have propensity 0 or less"
        )
        raise ValueError(
            f"propensities must lie in (0, 1]; {int(bad.sum())} do not, the first at round {i} "
            f"(propensity {float(pi[i])!r}): {why}"
        )
    low = int((pi < floor).sum())
    if low:
        warnings.warn(
            f"{low} propensities are below the floor {floor:g} (min {pi.min():.3g}): inverse-"
            "propensity inference needs a propensity floor; intervals may be unreliable",
            UserWarning,
            stacklevel=4,
        )


def check_data(
    X: Any,
    A: Any,
    Y: Any,
    propensity: Any,
    pred_labeled: Any,
    X_unlabeled: Any,
    pred_unlabeled: Any,
    *,
    target_arms: tuple[int, ...] = (),
    n_arms: int | None = None,
    floor: float = PROPENSITY_FLOOR,
) -> AdaptiveData:
    """Validate and normalise the arrays of :meth:`ppai.PPAI.fit`."""
    Y_ = as_float_array(Y, "Y", (1,))
    T = Y_.shape[0]
    if T < 2:
        raise ValueError(f"need at least 2 labeled rounds, got {T}")
    A_raw = as_float_array(A, "A", (1,))
    if np.any(A_raw != np.round(A_raw)):
        raise ValueError("A must hold integer arm indices, got non-integer values")
    A_ = A_raw.astype(np.int64)
    P = as_float_array(propensity, "propensity", (1, 2))
    F = as_float_array(pred_labeled, "pred_labeled", (1, 2))
    F_u = as_float_array(pred_unlabeled, "pred_unlabeled", (1, 2))
    X_ = None if X is None else as_float_array(X, "X", (1, 2))
    X_u = None if X_unlabeled is None else as_float_array(X_unlabeled, "X_unlabeled", (1, 2))
    if X_ is not None and X_.ndim == 1:
        X_ = X_[:, None]
    if X_u is not None and X_u.ndim == 1:
        X_u = X_u[:, None]

    lengths = {"A": A_.shape[0], "propensity": P.shape[0], "pred_labeled": F.shape[0]}
    if X_ is not None:
        lengths["X"] = X_.shape[0]
    wrong = {k: v for k, v in lengths.items() if v != T}
    if wrong:
        shapes = ", ".join(f"{k} has {v}" for k, v in wrong.items())
        raise ValueError(f"every labeled array needs one row per round: Y has {T} rows, {shapes}")
    N = F_u.shape[0]
    if X_u is not None and X_u.shape[0] != N:
        raise ValueError(
            f"X_unlabeled has {X_u.shape[0]} rows but pred_unlabeled has {N}: one row per context"
        )
    if (X_ is None) != (X_u is None):
        raise ValueError("give covariates for both the labeled rounds and the pool, or for neither")
    if X_ is not None and X_u is not None and X_.shape[1] != X_u.shape[1]:
        raise ValueError(f"X has {X_.shape[1]} columns but X_unlabeled has {X_u.shape[1]}")

    widths = {m.shape[1] for m in (P, F, F_u) if m.ndim == 2}
    if len(widths) > 1:
        raise ValueError(
            f"propensity, pred_labeled and pred_unlabeled give different numbers of arms: {sorted(widths)}"
        )
    K = (
        widths.pop()
        if widths
        else n_arms or max([int(A_.max()) + 1, *(a + 1 for a in target_arms)])
    )
    if n_arms is not None and n_arms != K:
        raise ValueError(f"n_arms={n_arms} but the arrays have {K} columns, one per arm")
    bad_arm = (A_ < 0) | (A_ >= K)
    if bad_arm.any():
        i = int(np.argmax(bad_arm))
        raise ValueError(f"arm index out of range [0, {K}): A[{i}] = {int(A_[i])}")
    for a in target_arms:
        if not 0 <= a < K:
            raise ValueError(f"target arm {a} is out of range [0, {K})")

    rows = np.arange(T)
    if P.ndim == 2:
        if np.any(P < 0):
            i, j = (int(k) for k in np.argwhere(P < 0)[0])
            raise ValueError(
                f"a propensity matrix must have non-negative rows summing to 1; "
                f"propensity[{i}, {j}] = {float(P[i, j])!r}"
            )
        off = np.abs(P.sum(1) - 1) > 1e-6
        if off.any():
            i = int(np.argmax(off))
            raise ValueError(
                f"a propensity matrix must have non-negative rows summing to 1; row {i} sums to "
                f"{float(P[i].sum())!r}"
            )
        pi = P[rows, A_]
    else:
        pi = P
    check_propensities(pi, floor)
    f = F[rows, A_] if F.ndim == 2 else F
    if F_u.ndim == 1 and len(target_arms) != 1:
        raise ValueError(
            "pred_unlabeled is a vector, which is only enough for one target arm; give an "
            f"(N, K) matrix of predictions for every arm (targets: {target_arms or 'a policy'})"
        )
    pool_arm = target_arms[0] if F_u.ndim == 1 else None
    return AdaptiveData(X_, A_, Y_, pi, f, X_u, F_u, K, F if F.ndim == 2 else None, pool_arm)


def check_logistic(data: AdaptiveData) -> None:
    """Binary outcomes, and predictions that are probabilities (soft labels in [0, 1])."""
    bad_y = (data.Y != 0) & (data.Y != 1)
    if bad_y.any():
        i = int(np.argmax(bad_y))
        raise ValueError(
            f"the logistic problem needs binary outcomes Y in {{0, 1}}; Y[{i}] = {float(data.Y[i])!r}"
        )
    labeled = data.f if data.f_all is None else data.f_all
    for name, F in (("pred_labeled", labeled), ("pred_unlabeled", data.f_u)):
        bad = (F < 0) | (F > 1)
        if bad.any():
            idx = tuple(int(j) for j in np.argwhere(bad)[0])
            raise ValueError(
                f"the logistic problem needs predictions that are probabilities in [0, 1]; "
                f"{name}{list(idx)} = {float(F[idx])!r} (pass predicted probabilities, not logits)"
            )
