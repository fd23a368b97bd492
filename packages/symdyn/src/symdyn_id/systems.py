"""Random equivariant linear systems and their trajectories (test fixtures, the reproduction)."""

from __future__ import annotations

import numpy as np

from .fourier import dense_operator
from .representation import Representation


def random_equivariant_matrix(
    rep: Representation, rng: np.random.Generator, spectral_radius: float = 0.95
) -> np.ndarray:
    """A in C(rho) with i.i.d. normal coefficients, scaled to the given spectral radius."""
    grid = rep.grid
    if grid is not None and grid.d == rep.d:
        kern = rng.standard_normal((*grid.shape, grid.channels, grid.channels))
        axes = tuple(range(len(grid.shape)))
        ops = np.fft.fftn(kern, axes=axes).reshape(grid.sites, grid.channels, grid.channels)
        radius = float(np.abs(np.linalg.eigvals(ops)).max())
        return dense_operator(grid, ops * (spectral_radius / radius))
    comm = rep.commutant()
    mat = comm.assemble(rng.standard_normal(comm.dim))
    radius = float(np.abs(np.linalg.eigvals(mat)).max())
    return mat * (spectral_radius / radius)


def simulate(
    a: np.ndarray,
    x0: np.ndarray,
    n_transitions: int,
    noise_std: float = 0.0,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """``x_{t+1} = A x_t + w_t``, ``w_t ~ N(0, noise_std^2 I)`` (process noise): ``(T+1, d)``."""
    if noise_std > 0 and rng is None:
        raise ValueError("simulate needs rng= when noise_std > 0")
    out = np.empty((n_transitions + 1, a.shape[0]))
    out[0] = x0
    for t in range(n_transitions):
        out[t + 1] = a @ out[t]
        if noise_std > 0:
            assert rng is not None
            out[t + 1] += noise_std * rng.standard_normal(a.shape[0])
    return out


def relative_error(a_hat: np.ndarray, a: np.ndarray) -> float:
    """``||A_hat - A||_F / ||A||_F``."""
    return float(np.linalg.norm(a_hat - a) / np.linalg.norm(a))
