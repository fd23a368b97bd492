"""Simulation data generated in torch: 2-D vorticity (Kolmogorov or decaying) and KdV solitons.

Both solvers are pseudo-spectral on a periodic box ``[0, 2*pi)^d`` with 2/3 de-aliasing and an
integrating-factor RK4 step: the linear terms (viscosity, drag, dispersion) are integrated exactly, so
one Fourier mode that the nonlinear term leaves alone decays exactly as the closed form says.

Vorticity form (the official code's ``NavierStokes2D`` in jax-cfd, plus drag and forcing)::

    w_t + u . grad(w) = nu lap(w) - alpha w + f,   psi_hat = w_hat / |k|^2,  u = psi_y, v = -psi_x

with Kolmogorov forcing ``f = -k_f cos(k_f y)`` (the curl of ``(sin(k_f y), 0)``), ``alpha = 0.1``.
``forcing=None`` with ``drag=0`` is the official experiment's decaying turbulence.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch

Tensor = torch.Tensor


def _wavenumbers(n: int, dtype: torch.dtype) -> Tensor:
    return torch.fft.fftfreq(n, d=1.0 / n).to(dtype)


def _dealias_mask(k: Tensor) -> Tensor:
    # 2/3 rule: zero every mode with |k| > n/3 along any axis.
    n = k.shape[0]
    return (k.abs() <= n / 3).to(k.dtype)


def grid_coords(n: int, dim: int = 2, dtype: torch.dtype = torch.float32) -> Tensor:
    """The ``(n**dim, dim)`` grid coordinates in ``[0, 2*pi)`` (raw, not rescaled, as the official code)."""
    if n < 1 or dim < 1:
        raise ValueError(f"grid_coords needs n >= 1 and dim >= 1, got n={n}, dim={dim}")
    x = torch.arange(n, dtype=torch.float64) * (2 * math.pi / n)
    mesh = torch.meshgrid(*([x] * dim), indexing="ij")
    return torch.stack([m.reshape(-1) for m in mesh], dim=1).to(dtype)


@dataclass
class VorticityState:
    """The solver state: vorticity in Fourier space (``rfft2``, half spectrum) and the physical time."""

    w_hat: Tensor
    t: float


class Vorticity2D:
    """Pseudo-spectral 2-D incompressible Navier-Stokes in vorticity form (torch, float64).

    ``forcing="kolmogorov"`` adds ``-k_f cos(k_f y)``; ``forcing=None`` is unforced. ``drag`` is the
    linear drag ``alpha``; ``dt`` defaults to ``0.5 * dx / max_velocity`` (CFL 0.5).
    Axis 0 is ``x``, axis 1 is ``y``.
    """

    def __init__(
        self,
        n: int = 128,
        nu: float = 1e-3,
        drag: float = 0.1,
        forcing: str | None = "kolmogorov",
        k_forcing: int = 4,
        dt: float | None = None,
        max_velocity: float = 6.0,
        dtype: torch.dtype = torch.float64,
    ) -> None:
        if n < 8:
            raise ValueError(f"n must be >= 8, got {n}")
        if nu < 0 or drag < 0:
            raise ValueError(f"nu and drag must be >= 0, got nu={nu}, drag={drag}")
        if forcing not in (None, "kolmogorov"):
            raise ValueError(f"forcing must be None or 'kolmogorov', got {forcing!r}")
        self.n, self.nu, self.drag, self.forcing, self.k_forcing = n, nu, drag, forcing, k_forcing
        self.dtype = dtype
        self.dt = float(dt) if dt is not None else 0.5 * (2 * math.pi / n) / max_velocity
        if self.dt <= 0:
            raise ValueError(f"dt must be > 0, got {self.dt}")
        # Real fields: half spectra (rfft2), kx along axis 0 (full), ky along axis 1 (half).
        kx = _wavenumbers(n, dtype)[:, None].expand(n, n // 2 + 1)
        ky = torch.fft.rfftfreq(n, d=1.0 / n).to(dtype)[None, :].expand(n, n // 2 + 1)
        self.kx, self.ky = kx, ky
        k2 = kx**2 + ky**2
        self.inv_k2 = torch.where(k2 > 0, 1.0 / torch.where(k2 > 0, k2, 1.0), 0.0)
        self.mask = ((kx.abs() <= n / 3) & (ky.abs() <= n / 3)).to(dtype)
        self.linear = -(nu * k2 + drag)  # the exactly integrated part
        # One batched inverse FFT gives u, v, w_x, w_y: their multipliers of w_hat, stacked.
        self.to_physical = torch.stack(
            [1j * ky * self.inv_k2, -1j * kx * self.inv_k2, 1j * kx, 1j * ky]
        )
        x = torch.arange(n, dtype=dtype) * (2 * math.pi / n)
        f = torch.zeros(n, n, dtype=dtype)
        if forcing == "kolmogorov":
            f = -k_forcing * torch.cos(k_forcing * x)[None, :].expand(n, n)
        self.f_hat = torch.fft.rfft2(f)

    # -- maths --------------------------------------------------------------------------------
    def velocity_hat(self, w_hat: Tensor) -> tuple[Tensor, Tensor]:
        """``(u_hat, v_hat)`` from the vorticity: ``u = psi_y``, ``v = -psi_x``."""
        psi_hat = w_hat * self.inv_k2
        return 1j * self.ky * psi_hat, -1j * self.kx * psi_hat

    def nonlinear(self, w_hat: Tensor) -> Tensor:
        """``-(u . grad w)`` plus the forcing, in Fourier space, de-aliased."""
        u, v, wx, wy = torch.fft.irfft2(self.to_physical * w_hat, s=(self.n, self.n))
        return -torch.fft.rfft2(u * wx + v * wy) * self.mask + self.f_hat

    def step_hat(self, w_hat: Tensor, dt: float) -> Tensor:
        """One integrating-factor RK4 step of size ``dt``."""
        e_half = torch.exp(self.linear * dt / 2)
        e_full = e_half * e_half
        k1 = self.nonlinear(w_hat)
        k2 = self.nonlinear(e_half * (w_hat + dt / 2 * k1))
        k3 = self.nonlinear(e_half * w_hat + dt / 2 * k2)
        k4 = self.nonlinear(e_full * w_hat + dt * e_half * k3)
        return e_full * w_hat + dt / 6 * (e_full * k1 + 2 * e_half * (k2 + k3) + k4)

    # -- state --------------------------------------------------------------------------------
    def initial_state(
        self, seed: int = 42, peak_wavenumber: float = 4.0, max_velocity: float = 5.0
    ) -> VorticityState:
        """A random band-limited vorticity peaked at ``peak_wavenumber``, scaled to ``max_velocity``.

        The analogue of jax-cfd's ``filtered_velocity_field`` (seeded, deterministic).
        """
        g = torch.Generator().manual_seed(seed)
        noise = torch.randn(self.n, self.n, generator=g, dtype=self.dtype)
        kmag = torch.sqrt(self.kx**2 + self.ky**2)
        envelope = torch.exp(-((kmag - peak_wavenumber) ** 2) / 2)
        w_hat = torch.fft.rfft2(noise) * envelope * self.mask
        w_hat[0, 0] = 0
        u, v = self._velocity(w_hat)
        speed = torch.sqrt(u**2 + v**2)
        return VorticityState(w_hat * (max_velocity / speed.max()), 0.0)

    def state_from_field(self, w: Tensor, t: float = 0.0) -> VorticityState:
        if w.shape != (self.n, self.n):
            raise ValueError(f"vorticity must have shape {(self.n, self.n)}, got {tuple(w.shape)}")
        return VorticityState(torch.fft.rfft2(w.to(self.dtype)), float(t))

    def field(self, state: VorticityState) -> Tensor:
        """The physical vorticity ``(n, n)``."""
        return torch.fft.irfft2(state.w_hat, s=(self.n, self.n))

    def _velocity(self, w_hat: Tensor) -> tuple[Tensor, Tensor]:
        u_hat, v_hat = self.velocity_hat(w_hat)
        shape = (self.n, self.n)
        return torch.fft.irfft2(u_hat, s=shape), torch.fft.irfft2(v_hat, s=shape)

    def advance(self, state: VorticityState, duration: float) -> VorticityState:
        """Advance by ``duration`` with steps no longer than ``dt`` (the last one shortened)."""
        steps = max(1, math.ceil(duration / self.dt - 1e-9))
        h = duration / steps
        w_hat = state.w_hat
        for _ in range(steps):
            w_hat = self.step_hat(w_hat, h)
        return VorticityState(w_hat, state.t + duration)

    # -- diagnostics --------------------------------------------------------------------------
    def energy(self, state: VorticityState) -> float:
        """Mean kinetic energy ``0.5 * mean(u^2 + v^2)``."""
        u, v = self._velocity(state.w_hat)
        return float(0.5 * (u**2 + v**2).mean())

    def enstrophy(self, state: VorticityState) -> float:
        """Mean enstrophy ``0.5 * mean(w^2)``."""
        return float(0.5 * (self.field(state) ** 2).mean())

    def divergence(self, state: VorticityState) -> Tensor:
        """``u_x + v_y`` computed spectrally (zero to rounding)."""
        u_hat, v_hat = self.velocity_hat(state.w_hat)
        return torch.fft.irfft2(1j * self.kx * u_hat + 1j * self.ky * v_hat, s=(self.n, self.n))


def kolmogorov_flow(
    n: int = 128,
    T: float = 20.0,
    save_every: float = 0.025,
    forcing: str | None = "kolmogorov",
    nu: float = 1e-3,
    drag: float = 0.1,
    seed: int = 42,
    spinup: float = 0.0,
    dtype: torch.dtype = torch.float32,
) -> Iterator[tuple[float, Tensor]]:
    """Yield ``(t, vorticity)`` every ``save_every`` up to ``T`` (the first frame at ``t = spinup``).

    ``forcing=None`` (with ``drag=0``) is the official unforced decaying flow. Fields come as ``dtype``.
    """
    if T <= 0 or save_every <= 0:
        raise ValueError(f"T and save_every must be > 0, got T={T}, save_every={save_every}")
    solver = Vorticity2D(n=n, nu=nu, drag=drag, forcing=forcing)
    state = solver.initial_state(seed=seed)
    if spinup > 0:
        state = solver.advance(state, spinup)
    frames = round(T / save_every)
    for i in range(frames + 1):
        if i:
            state = solver.advance(state, save_every)
        yield state.t, solver.field(state).to(dtype)


class KdV1D:
    """``u_t + alpha u u_x + u_xxx = 0`` on ``[0, L)``, pseudo-spectral with integrating-factor RK4."""

    def __init__(
        self,
        n: int = 256,
        length: float = 2 * math.pi * 8,
        alpha: float = 6.0,
        dt: float | None = None,
    ) -> None:
        if n < 8 or length <= 0:
            raise ValueError(f"KdV needs n >= 8 and length > 0, got n={n}, length={length}")
        self.n, self.length, self.alpha = n, length, alpha
        self.k = torch.fft.fftfreq(n, d=length / (2 * math.pi * n)).to(torch.float64)
        self.mask = _dealias_mask(torch.fft.fftfreq(n, d=1.0 / n).to(torch.float64))
        kmax = float(self.k.abs().max())
        self.dt = float(dt) if dt is not None else 1.0 / kmax**2 * 2.5
        self.linear = 1j * self.k**3  # u_t = -u_xxx -> i k^3 u_hat

    def x(self) -> Tensor:
        return torch.arange(self.n, dtype=torch.float64) * (self.length / self.n)

    def rhs_nonlinear(self, u_hat: Tensor) -> Tensor:
        u = torch.fft.ifft(u_hat).real
        return -self.alpha / 2 * 1j * self.k * torch.fft.fft(u * u) * self.mask

    def time_derivative(self, u: Tensor) -> Tensor:
        """``u_t = -u_xxx - alpha u u_x`` (the KdV selector's activity input)."""
        u_hat = torch.fft.fft(u.to(torch.float64))
        return torch.fft.ifft(self.linear * u_hat + self.rhs_nonlinear(u_hat)).real

    def step_hat(self, u_hat: Tensor, dt: float) -> Tensor:
        e_half = torch.exp(self.linear * dt / 2)
        e_full = e_half * e_half
        k1 = self.rhs_nonlinear(u_hat)
        k2 = self.rhs_nonlinear(e_half * (u_hat + dt / 2 * k1))
        k3 = self.rhs_nonlinear(e_half * u_hat + dt / 2 * k2)
        k4 = self.rhs_nonlinear(e_full * u_hat + dt * e_half * k3)
        return e_full * u_hat + dt / 6 * (e_full * k1 + 2 * e_half * (k2 + k3) + k4)


def soliton(x: Tensor, c: float, x0: float, alpha: float = 6.0) -> Tensor:
    """One KdV soliton of speed ``c`` centred at ``x0``: ``(3c/alpha) sech^2(sqrt(c)/2 (x - x0))``."""
    return (3 * c / alpha) / torch.cosh(math.sqrt(c) / 2 * (x - x0)) ** 2


def kdv_soliton(
    n: int = 256,
    T: float = 10.0,
    save_every: float = 0.02,
    speeds: tuple[float, ...] = (2.0, 0.5),
    positions: tuple[float, ...] = (10.0, 25.0),
    length: float = 50.0,
    dtype: torch.dtype = torch.float32,
) -> Iterator[tuple[float, Tensor]]:
    """Yield ``(t, u)`` of colliding KdV solitons (a fast one overtakes a slow one: a bursty event)."""
    if len(speeds) != len(positions):
        raise ValueError(f"speeds and positions must match, got {len(speeds)} and {len(positions)}")
    solver = KdV1D(n=n, length=length)
    x = solver.x()
    u = sum(
        (soliton(x, c, x0, solver.alpha) for c, x0 in zip(speeds, positions, strict=True)),
        torch.zeros_like(x),
    )
    u_hat = torch.fft.fft(u)
    frames = round(T / save_every)
    t = 0.0
    for i in range(frames + 1):
        if i:
            steps = max(1, math.ceil(save_every / solver.dt))
            for _ in range(steps):
                u_hat = solver.step_hat(u_hat, save_every / steps)
            t += save_every
        yield t, torch.fft.ifft(u_hat).real.to(dtype)
