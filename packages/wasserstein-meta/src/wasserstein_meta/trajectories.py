"""Reference trajectories: minimum-derivative piecewise polynomials through random knots.

As in the base code, each coordinate of a reference is a spline of polynomial order ``p`` through
knots evenly spaced in time, minimising ``∫ (d^k r / dt^k)²`` (``k = deriv_order``: 4 = minimum snap
for x and y, 2 for φ), at rest at both ends. The minimiser is found from the KKT system of the
equality-constrained quadratic programme, per coordinate.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from math import factorial

import numpy as np
import torch


def _deriv_row(order: int, deriv: int, tau: float) -> np.ndarray:
    """Row ``r`` with ``r @ c = d^deriv/dτ^deriv Σ c_j τ^j`` at ``τ``."""
    row = np.zeros(order + 1)
    for j in range(deriv, order + 1):
        row[j] = factorial(j) / factorial(j - deriv) * tau ** (j - deriv)
    return row


def _cost_matrix(order: int, deriv: int) -> np.ndarray:
    """``∫₀¹ (c^{(k)}(τ))² dτ = cᵀ M c`` on the unit interval."""
    M = np.zeros((order + 1, order + 1))
    for i in range(deriv, order + 1):
        for j in range(deriv, order + 1):
            ci = factorial(i) / factorial(i - deriv)
            cj = factorial(j) / factorial(j - deriv)
            M[i, j] = ci * cj / (i + j - 2 * deriv + 1)
    return M


def min_derivative_spline(values: np.ndarray, order: int, deriv: int) -> np.ndarray:
    """Coefficients ``(segments, order + 1)`` in unit local time of the min-``deriv`` spline.

    Passes through ``values`` at τ = 0, 1 of consecutive segments, is continuous up to derivative
    ``min(order − 1, 2·deriv − 2)`` at interior knots and has zero derivatives 1 … deriv − 1 at the ends.
    """
    n_seg = len(values) - 1
    width = order + 1
    cont = min(order - 1, 2 * deriv - 2)
    rows, rhs = [], []

    def put(seg_rows: dict[int, np.ndarray], value: float) -> None:
        row = np.zeros(n_seg * width)
        for seg, r in seg_rows.items():
            row[seg * width : (seg + 1) * width] += r
        rows.append(row)
        rhs.append(value)

    for i in range(n_seg):
        put({i: _deriv_row(order, 0, 0.0)}, values[i])
        put({i: _deriv_row(order, 0, 1.0)}, values[i + 1])
    for i in range(n_seg - 1):
        for d in range(1, cont + 1):
            put({i: _deriv_row(order, d, 1.0), i + 1: -_deriv_row(order, d, 0.0)}, 0.0)
    for d in range(1, deriv):
        put({0: _deriv_row(order, d, 0.0)}, 0.0)
        put({n_seg - 1: _deriv_row(order, d, 1.0)}, 0.0)
    A, b = np.array(rows), np.array(rhs)
    H = np.kron(np.eye(n_seg), _cost_matrix(order, deriv))
    kkt = np.block([[2 * H, A.T], [A, np.zeros((len(A), len(A)))]])
    sol = np.linalg.lstsq(kkt, np.concatenate([np.zeros(len(H)), b]), rcond=None)[0]
    return sol[: n_seg * width].reshape(n_seg, width)


@dataclasses.dataclass(frozen=True)
class Spline:
    """One reference ``r(t)`` (``R³`` for the PFAR, flat outputs ``R²`` for the PVTOL): knot times and
    per-coordinate unit-time coefficients."""

    knot_times: np.ndarray
    coeffs: tuple[np.ndarray, ...]

    @property
    def T(self) -> float:
        return float(self.knot_times[-1])

    def __call__(self, t: np.ndarray | float, derivs: int = 2) -> np.ndarray:
        """``(derivs + 1, len(t), coords)``: r, ṙ, r̈, … at times ``t`` (clamped to [0, T])."""
        t = np.asarray(np.clip(np.atleast_1d(np.asarray(t, dtype=float)), 0.0, self.T))
        seg = np.clip(
            np.searchsorted(self.knot_times, t, side="right") - 1, 0, len(self.knot_times) - 2
        )
        h = np.diff(self.knot_times)[seg]
        tau = (t - self.knot_times[seg]) / h
        out = np.zeros((derivs + 1, len(t), len(self.coeffs)))
        for c, coeff in enumerate(self.coeffs):
            order = coeff.shape[1] - 1
            for d in range(derivs + 1):
                total = np.zeros(len(t))
                for j in range(d, order + 1):
                    total += coeff[seg, j] * factorial(j) / factorial(j - d) * tau ** (j - d)
                out[d, :, c] = total / h**d
        return out


def spline(
    knot_times: Sequence[float],
    knot_values: np.ndarray,
    poly_orders: Sequence[int] = (9, 9, 6),
    deriv_orders: Sequence[int] = (4, 4, 2),
) -> Spline:
    """A reference through ``knot_values`` ``(num_knots, 3)`` at increasing ``knot_times``."""
    times = np.asarray(knot_times, dtype=float)
    values = np.asarray(knot_values, dtype=float)
    if times.ndim != 1 or len(times) < 2:
        raise ValueError(f"a spline needs at least 2 knots, got {len(np.atleast_1d(times))}")
    if not np.all(np.diff(times) > 0) or not np.isfinite(times).all():
        raise ValueError(f"knot times must be finite and strictly increasing, got {times.tolist()}")
    if values.shape != (len(times), len(poly_orders)):
        raise ValueError(
            f"knot values must have shape ({len(times)}, {len(poly_orders)}), got {values.shape}"
        )
    if not np.isfinite(values).all():
        raise ValueError("knot values must be finite (got NaN or inf)")
    for p, k in zip(poly_orders, deriv_orders, strict=True):
        if not (k >= 1 and p >= 2 * k - 1):
            raise ValueError(f"poly order {p} cannot minimise derivative {k} (need p >= 2k - 1)")
    coeffs = tuple(
        min_derivative_spline(values[:, c], p, k)
        for c, (p, k) in enumerate(zip(poly_orders, deriv_orders, strict=True))
    )
    return Spline(times, coeffs)


def random_splines(
    n: int,
    T: float = 5.0,
    num_knots: int = 6,
    poly_orders: Sequence[int] = (9, 9, 6),
    deriv_orders: Sequence[int] = (4, 4, 2),
    knot_scale: float = 1.0,
    max_step: tuple[float, float, float] = (2.0, 2.0, math.pi / 6),
    phi_max: float = math.pi / 3,
    seed: int = 0,
) -> list[Spline]:
    """``n`` random references on ``[0, T]``: a random walk of knots from the origin.

    Knot steps are uniform in ``±knot_scale · max_step`` (±2 m, ±2 m, ±π/6; the base code's
    meta-training uses ``knot_scale = 0.7``), φ clipped to ``±phi_max``.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not (T > 0 and math.isfinite(T)):
        raise ValueError(f"T must be a positive duration, got {T}")
    if num_knots < 2:
        raise ValueError(f"num_knots must be >= 2, got {num_knots}")
    if not 0 < phi_max < math.pi / 2:
        raise ValueError(f"phi_max must lie in (0, π/2), got {phi_max}")
    rng = np.random.default_rng(seed)
    times = np.linspace(0.0, T, num_knots)
    step = knot_scale * np.asarray(max_step)
    refs = []
    for _ in range(n):
        knots = np.zeros((num_knots, 3))
        knots[1:] = np.cumsum(rng.uniform(-step, step, size=(num_knots - 1, 3)), axis=0)
        knots[:, 2] = np.clip(knots[:, 2], -phi_max, phi_max)
        refs.append(spline(times.tolist(), knots, poly_orders, deriv_orders))
    return refs


def random_flat_splines(
    n: int,
    T: float = 10.0,
    num_knots: int = 6,
    knot_scale: float = 1.0,
    max_step: tuple[float, float] = (2.0, 2.0),
    seed: int = 0,
) -> list[Spline]:
    """``n`` random PVTOL flat-output references ``(x, y)`` on ``[0, T]`` (base code: 6 knots, orders
    (9, 9), minimum jerk (3, 3), knot steps ±2 m): a random walk of knots from the origin."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not (T > 0 and math.isfinite(T)):
        raise ValueError(f"T must be a positive duration, got {T}")
    if num_knots < 2:
        raise ValueError(f"num_knots must be >= 2, got {num_knots}")
    rng = np.random.default_rng(seed)
    times = np.linspace(0.0, T, num_knots)
    step = knot_scale * np.asarray(max_step)
    refs = []
    for _ in range(n):
        knots = np.zeros((num_knots, 2))
        knots[1:] = np.cumsum(rng.uniform(-step, step, size=(num_knots - 1, 2)), axis=0)
        refs.append(spline(times.tolist(), knots, (9, 9), (3, 3)))
    return refs


def evaluate(
    refs: Sequence[Spline],
    t: np.ndarray,
    derivs: int = 2,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """``(derivs + 1, len(refs), len(t), coords)`` tensor of the references and their derivatives,
    on ``device`` (default: torch's default device)."""
    values = np.stack([r(t, derivs) for r in refs], axis=1)
    return torch.as_tensor(values, dtype=dtype, device=device)
