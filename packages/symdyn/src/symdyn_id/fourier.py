"""FFT fast path for a product of cyclic groups acting regularly on a grid, with k channels.

The action of C_{n_1} x ... x C_{n_r} by shifts on sites ``s`` (row-major on the grid), with ``k``
channels per site (state index ``site * k + channel``), has the block-(multi)circulant commutant:
``M[(s, a), (s', b)] = K[(s - s') mod n, a, b]``. The FFT over the sites diagonalises it, and least
squares on the commutant decouples into one ``k x k`` complex problem per frequency w:

    A_w = argmin sum_t |y_t(w) - A_w x_t(w)|^2 + ridge * F |A_w|^2,   F = prod(n)

(``ridge ||M||_F^2`` of the spatial problem, by Parseval). Cost O(T d log d + F k^2 T) against
O(d T p^2) for the orbital design.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True, eq=False)
class GridShape:
    """Sites on a grid ``shape`` with ``channels`` coordinates per site (d = prod(shape) * k).

    ``relabel`` (a relabelled grid group, see ``Representation.conjugate``): grid coordinate ``i``
    is state coordinate ``relabel[i]``.
    """

    shape: tuple[int, ...]
    channels: int = 1
    relabel: np.ndarray | None = None

    def relabelled(self, sigma: np.ndarray) -> GridShape:
        """The same grid after state coordinate ``i`` became ``sigma[i]``."""
        order = sigma if self.relabel is None else sigma[self.relabel]
        return GridShape(self.shape, self.channels, order)

    @property
    def sites(self) -> int:
        return int(np.prod(self.shape))

    @property
    def d(self) -> int:
        return self.sites * self.channels

    def spectra(self, states: np.ndarray) -> np.ndarray:
        """``(T, d)`` real states -> ``(F, k, T)`` their Fourier coefficients per frequency."""
        n_t = states.shape[0]
        if self.relabel is not None:
            states = states[:, self.relabel]
        grid = states.reshape(n_t, *self.shape, self.channels)
        spec = np.fft.fftn(grid, axes=tuple(range(1, len(self.shape) + 1)))
        return spec.reshape(n_t, self.sites, self.channels).transpose(1, 2, 0)


def fourier_lstsq(
    grid: GridShape, states: np.ndarray, targets: np.ndarray, ridge: float = 0.0
) -> tuple[np.ndarray, int]:
    """Per-frequency ``k x k`` operators ``(F, k, k)`` and the real design rank ``k sum_w rank_w``."""
    xs, ys = grid.spectra(states), grid.spectra(targets)
    if ridge > 0:
        xh = np.conj(np.swapaxes(xs, 1, 2))
        gram = xs @ xh + ridge * grid.sites * np.eye(grid.channels)
        ops = np.swapaxes(
            np.linalg.solve(np.swapaxes(gram, 1, 2), np.swapaxes(ys @ xh, 1, 2)), 1, 2
        )
    else:
        ops = ys @ np.linalg.pinv(xs)
    rank = int(np.linalg.matrix_rank(xs).sum()) * grid.channels
    return ops, rank


def dense_operator(grid: GridShape, ops: np.ndarray) -> np.ndarray:
    """The real ``(d, d)`` matrix whose per-frequency blocks are ``ops``."""
    k, axes = grid.channels, tuple(range(len(grid.shape)))
    # kernel K[s, a, b] = (B e_{(0, b)})[(s, a)]: the inverse FFT of the operators
    kern = np.fft.ifftn(ops.reshape(*grid.shape, k, k), axes=axes).real
    kern = kern.reshape(grid.sites, k, k)
    coords = np.array(np.unravel_index(np.arange(grid.sites), grid.shape)).T  # (F, r)
    diff = (coords[:, None, :] - coords[None, :, :]) % np.array(grid.shape)
    flat = np.ravel_multi_index(tuple(np.moveaxis(diff, -1, 0)), grid.shape)  # (F, F)
    blocks = kern[flat]  # (F, F, k, k): [s, s', a, b]
    mat = blocks.transpose(0, 2, 1, 3).reshape(grid.d, grid.d)
    if grid.relabel is None:
        return mat
    out = np.empty_like(mat)
    out[np.ix_(grid.relabel, grid.relabel)] = mat
    return out
