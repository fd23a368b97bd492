"""The SSN rate equation as pure functions on tensors.

    tau * dr/dt = -r + k [W r + h]_+^n

``r`` is ``(B, N)`` (a batch of rate vectors, E units first), ``W`` the signed ``(N, N)`` weight
matrix (inhibitory columns negative), ``h`` the ``(B, N)`` drive and ``tau`` the ``(N,)`` time
constants. The stateful :class:`~ssn_lateral.network.SSN` assembles ``W`` and ``h`` from its
Dale's-law blocks and calls these.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import torch
from sklearn.exceptions import ConvergenceWarning

__all__ = [
    "ConvergenceWarning",
    "SSNDivergenceError",
    "SSNParams",
    "SteadyStateInfo",
    "euler_steady_state",
    "fixed_point_jacobian",
    "power_law",
    "rhs",
    "rhs_jacobian",
    "spectral_abscissa",
]


class SSNDivergenceError(RuntimeError):
    """The rates ran away (above ``r_max`` or non-finite): the network is not stabilised."""


@dataclasses.dataclass(frozen=True)
class SSNParams:
    """Constants of the rate equation and of its Euler solver (times in ms).

    ``n``, ``k``: the power law ``k [u]_+^n``. ``tau_e``, ``tau_i``: time constants. ``dt``: Euler
    step, at most ``0.5 * min(tau)`` (forward Euler of ``-r/tau`` is unstable beyond ``2 tau``; we
    keep a factor 4 of margin). ``t_max``: the time budget of a steady state. ``tol``: converged when
    ``max|k[Wr+h]^n - r| / max(1, max r) < tol``. ``r_max``: a rate above it is divergence.
    ``check_every``: steps between convergence checks (a check costs a reduction and a sync).
    """

    n: float = 2.0
    k: float = 0.04
    tau_e: float = 20.0
    tau_i: float = 10.0
    dt: float = 1.0
    t_max: float = 2000.0
    tol: float = 1e-5
    r_max: float = 1e3
    check_every: int = 10

    def __post_init__(self) -> None:
        for name in ("n", "k", "tau_e", "tau_i", "dt", "t_max", "tol", "r_max"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"SSNParams.{name} must be a finite number, got {value!r}")
        if self.n < 1:
            raise ValueError(f"SSNParams.n (power-law exponent) must be >= 1, got {self.n}")
        if self.k <= 0:
            raise ValueError(f"SSNParams.k (gain) must be > 0, got {self.k}")
        if self.tau_e <= 0 or self.tau_i <= 0:
            raise ValueError(
                f"time constants must be > 0, got tau_e={self.tau_e}, tau_i={self.tau_i}"
            )
        if not 0 < self.dt <= 0.5 * min(self.tau_e, self.tau_i):
            raise ValueError(
                f"SSNParams.dt must be in (0, 0.5*min(tau)] = (0, {0.5 * min(self.tau_e, self.tau_i)}]"
                f" for a stable Euler step, got {self.dt}"
            )
        if self.t_max < self.dt:
            raise ValueError(f"SSNParams.t_max must be >= dt={self.dt}, got {self.t_max}")
        if self.tol <= 0 or self.r_max <= 0:
            raise ValueError(f"tol and r_max must be > 0, got tol={self.tol}, r_max={self.r_max}")
        if not isinstance(self.check_every, int) or self.check_every < 1:
            raise ValueError(f"SSNParams.check_every must be an int >= 1, got {self.check_every!r}")

    def tau(self, n_e: int, n_i: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The ``(n_e + n_i,)`` vector of time constants."""
        return torch.cat(
            [
                torch.full((n_e,), self.tau_e, dtype=dtype),
                torch.full((n_i,), self.tau_i, dtype=dtype),
            ]
        )


@dataclasses.dataclass
class SteadyStateInfo:
    """What :func:`euler_steady_state` did: per-row steps, final residual and convergence."""

    steps: torch.Tensor
    residual: torch.Tensor
    converged: torch.Tensor


def power_law(u: torch.Tensor, k: float, n: float) -> torch.Tensor:
    """``k [u]_+^n``, the SSN's supralinear input-output function."""
    return k * torch.clamp(u, min=0.0).pow(n)


def rhs(r: torch.Tensor, W: torch.Tensor, h: torch.Tensor, k: float, n: float, tau: torch.Tensor):
    """``dr/dt = (-r + k [r W^T + h]_+^n) / tau``, batched over rows."""
    return (power_law(torch.addmm(h, r, W.T), k, n) - r) / tau


def rhs_jacobian(
    r: torch.Tensor, W: torch.Tensor, h: torch.Tensor, k: float, n: float, tau: torch.Tensor
) -> torch.Tensor:
    """``d rhs / d r`` at any ``r``: ``diag(1/tau) (-I + diag(n k [u]_+^{n-1}) W)``, ``(B, N, N)``."""
    u = torch.addmm(h, r, W.T)
    gain = n * k * torch.clamp(u, min=0.0).pow(n - 1)
    eye = torch.eye(W.shape[0], dtype=W.dtype, device=W.device)
    return (gain.unsqueeze(-1) * W - eye) / tau.unsqueeze(-1)


def fixed_point_jacobian(r: torch.Tensor, W: torch.Tensor, k: float, n: float, tau: torch.Tensor):
    """The Jacobian at a fixed point from the rates alone: ``Phi = n k^{1/n} r^{1-1/n}``.

    At ``r = k[u]_+^n`` the gain ``n k u^{n-1}`` equals ``n k^{1/n} r^{1-1/n}``, so no drive is needed.
    """
    gain = n * k ** (1.0 / n) * torch.clamp(r, min=0.0).pow(1.0 - 1.0 / n)
    eye = torch.eye(W.shape[0], dtype=W.dtype, device=W.device)
    return (gain.unsqueeze(-1) * W - eye) / tau.unsqueeze(-1)


def spectral_abscissa(J: torch.Tensor) -> torch.Tensor:
    """The largest real part of the eigenvalues of each ``(N, N)`` matrix in ``J``."""
    return torch.linalg.eigvals(J).real.amax(dim=-1)


def _divergence(
    r: torch.Tensor, r_max: float, step: int, contrast: object, last_finite: float = float("nan")
) -> SSNDivergenceError:
    finite = torch.isfinite(r).all()
    peak = float(r.abs().max()) if finite else float("nan")
    what = (
        f"max rate {peak:.4g} > r_max={r_max:g}"
        if finite
        else f"a non-finite rate (last finite max rate {last_finite:.4g})"
    )
    return SSNDivergenceError(
        f"SSN diverged at contrast {contrast} on Euler step {step}: {what}. The network is not "
        "stabilised (inhibition too weak or excitation too strong for this drive)."
    )


def diverged(r: torch.Tensor, r_max: float) -> bool:
    """Whether any rate is above ``r_max`` or non-finite (one reduction: NaN fails ``<=``)."""
    return not bool(r.abs().amax() <= r_max) if r.numel() else False


def euler_steady_state(
    W: torch.Tensor,
    h: torch.Tensor,
    tau: torch.Tensor,
    params: SSNParams,
    r0: torch.Tensor | None = None,
    *,
    contrast: object = "?",
) -> tuple[torch.Tensor, SteadyStateInfo]:
    """Integrate to the fixed point with forward Euler, stopping each row once it has converged.

    Rows that converge are frozen and dropped from the batch, so a batch costs what its slowest
    rows cost only for those rows. Raises :class:`SSNDivergenceError` on runaway rates and warns
    :class:`ConvergenceWarning` (with the residual) for rows still moving at ``t_max``.
    """
    k, n = params.k, params.n
    r = torch.zeros_like(h) if r0 is None else r0.to(h).clone()
    alpha = params.dt / tau  # (N,)
    n_steps = max(1, round(params.t_max / params.dt))
    steps = torch.full((h.shape[0],), n_steps, dtype=torch.long)
    residual = torch.zeros(h.shape[0], dtype=h.dtype)
    active = torch.arange(h.shape[0])
    ra, ha, Wt = r, h, W.T
    step = 0
    while step < n_steps and active.numel():
        block = min(params.check_every, n_steps - step)
        for _ in range(block):
            previous = ra
            ra = ra + alpha * (power_law(torch.addmm(ha, ra, Wt), k, n) - ra)
            step += 1
            # every step: supralinear rates overflow to inf within a few steps of r_max
            if diverged(ra, params.r_max):
                raise _divergence(ra, params.r_max, step, contrast, float(previous.abs().max()))
        # convergence is judged on the fixed-point residual, not on the step size
        res = (power_law(torch.addmm(ha, ra, Wt), k, n) - ra).abs().amax(dim=1)
        scale = torch.clamp(ra.abs().amax(dim=1), min=1.0)
        rel = res / scale
        done = rel < params.tol
        r[active] = ra
        residual[active] = rel
        if done.any():
            steps[active[done]] = step
            keep = ~done
            active, ra, ha = active[keep], ra[keep], ha[keep]
    converged = torch.ones(h.shape[0], dtype=torch.bool)
    converged[active] = False
    if active.numel():
        warnings.warn(
            f"SSN steady state did not converge within t_max={params.t_max:g} ms for "
            f"{active.numel()} of {h.shape[0]} inputs (contrast {contrast}): max relative residual "
            f"{float(residual[active].max()):.3g} > tol={params.tol:g}. Increase t_max or tol.",
            ConvergenceWarning,
            stacklevel=3,
        )
    return r, SteadyStateInfo(steps=steps, residual=residual, converged=converged)
