"""Checks at the boundary: trajectories in, numbers out."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

EXCITATION_MESSAGE = "trajectory is not persistently exciting; identifiability not guaranteed"


class NotExcitingWarning(UserWarning):
    """The trajectory cannot identify the system (it vanishes, is constant, or spans too little)."""


def _one_trajectory(x: Any, snapshots_axis: int, d: int | None, where: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind == "c":
        raise ValueError(f"{where} must be real, got dtype {arr.dtype}")
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{where} must be numeric, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(
            f"{where} must be 2-D, (T+1, d) with time along rows (or set snapshots_axis=1 for "
            f"PyDMD's (d, T+1) columns), got shape {arr.shape}"
        )
    if snapshots_axis == 1:
        arr = arr.T
    if d is not None and arr.shape[1] != d:
        hint = (
            "; it looks transposed: pass (T+1, d) or snapshots_axis=1" if arr.shape[0] == d else ""
        )
        raise ValueError(
            f"{where} must have d = {d} columns (states along rows), got shape {arr.shape}{hint}"
        )
    if arr.shape[0] < 2:
        raise ValueError(
            f"{where} needs at least two states (T >= 1 transition), got shape {arr.shape}"
        )
    out = arr.astype(np.float64, copy=True)
    if not np.all(np.isfinite(out)):
        bad = np.argwhere(~np.isfinite(out))[0]
        raise ValueError(
            f"{where} holds non-finite values (first at row {bad[0]}, column {bad[1]})"
        )
    return out


def check_trajectories(
    x: Any, snapshots_axis: int = 0, d: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """One trajectory ``(T+1, d)`` or a list of them -> states ``(T, d)`` and targets ``(T, d)``.

    The input is copied, never modified. Raises ValueError naming the problem.
    """
    if snapshots_axis not in (0, 1):
        raise ValueError(f"snapshots_axis must be 0 or 1, got {snapshots_axis!r}")
    if isinstance(x, (list, tuple)) and x and np.ndim(x[0]) == 2:
        trajs = [_one_trajectory(t, snapshots_axis, d, f"trajectory {i}") for i, t in enumerate(x)]
        widths = {t.shape[1] for t in trajs}
        if len(widths) != 1:
            raise ValueError(f"trajectories must share d, got d in {sorted(widths)}")
    else:
        trajs = [_one_trajectory(x, snapshots_axis, d, "X")]
    states = np.concatenate([t[:-1] for t in trajs])
    targets = np.concatenate([t[1:] for t in trajs])
    return states, targets


def rescaled(states: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """``(states / s, targets / s, s)`` with ``s`` the largest magnitude (1 for all-zero data).

    A is scale invariant; fitting at unit scale keeps norms and residuals away from underflow
    (trajectories near 1e-200) and overflow (near 1e200). ``s`` is a power of two: exact.
    """
    peak = max(float(np.abs(states).max(initial=0.0)), float(np.abs(targets).max(initial=0.0)))
    if peak == 0.0:
        return states, targets, 1.0
    scale = float(2.0 ** np.frexp(peak)[1])
    return states / scale, targets / scale, scale


def warn_if_not_exciting(states: np.ndarray, targets: np.ndarray) -> bool:
    """Warn (and return True) when the trajectory vanishes or stands still."""
    # max-abs, not 2-norms: a squared norm underflows to 0 for states near 1e-200
    first = float(np.abs(states[0]).max())
    last = float(np.abs(targets[-1]).max())
    scale = max(first, float(np.abs(states).max()))
    reason = ""
    if scale == 0.0:
        reason = "every state is zero"
    elif last <= 1e-12 * scale:
        reason = "it decays to zero"
    elif np.allclose(targets, states, rtol=1e-12, atol=1e-14 * scale):
        reason = "it is constant"
    if reason:
        warnings.warn(f"{EXCITATION_MESSAGE} ({reason})", NotExcitingWarning, stacklevel=3)
    return bool(reason)


def check_state(x0: Any, d: int) -> np.ndarray:
    """An initial state ``(d,)`` or a batch ``(n, d)`` as float64."""
    arr = np.asarray(x0, dtype=np.float64)
    if arr.ndim not in (1, 2) or arr.shape[-1] != d:
        raise ValueError(f"x0 must have shape ({d},) or (n, {d}), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("x0 holds non-finite values")
    return arr


def check_nonnegative(value: Any, name: str) -> float:
    if not isinstance(value, (int, float, np.floating, np.integer)) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return float(value)


class ParamsMixin:
    """scikit-learn's ``get_params``/``set_params`` without depending on scikit-learn."""

    _param_names: Sequence[str] = ()

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._param_names}

    def set_params(self, **params: Any) -> Any:
        for name, value in params.items():
            if name not in self._param_names:
                raise ValueError(f"invalid parameter {name!r}; valid: {list(self._param_names)}")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"
