"""Test-inversion interval for the quantile, as ``ppi_py.ppi_quantile_ci`` (no density estimate).

For the q-quantile ψ(θ; y) = 1{y ≤ θ} − q is a step function, so the Wald interval needs the density
of Y at θ̂. Inverting the test of H0: Ψ_λ(θ) = 0 at every θ of a grid needs none: θ is kept when

    |Ψ_λ(θ)| ≤ z_{1−α/2} sqrt(Var Ψ_λ(θ)),
    Var Ψ_λ(θ) = Cov_t(a_t − λ b_t) / T + λ² s² Var_j(1{f̃_j ≤ θ}) / N,

with ``a_t = w_t (1{Y_t ≤ θ} − q)`` and ``b_t = w_t (1{f_t ≤ θ} − q)`` (the variance of
:func:`ppai.covariance` with H = 1). Every term is a weighted empirical CDF, so the whole grid costs
a few sorts. The variances use ``ddof=0`` as ``ppi_py`` does (the Wald intervals use 1), so with
w ≡ 1 and λ = 1 this is ``ppi_py``'s interval exactly, grid and ends.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri

from ppai.estimating import Block
from ppai.problems import Array


def _weighted_cdf(values: Array, weights: Array, grid: Array) -> Array:
    """``Σ_i weights_i 1{values_i ≤ g}`` for every g of the sorted ``grid``."""
    order = np.argsort(values, kind="stable")
    cum = np.r_[0.0, np.cumsum(weights[order])]
    return cum[np.searchsorted(values[order], grid, side="right")]


def quantile_inversion_interval(
    block: Block, q: float, lam: float, alpha: float, grid_size: int = 5000
) -> tuple[float, float]:
    """``(lower, upper)``: the smallest and largest grid value the level-α test does not reject.

    ``block`` must have a single pool arm with ν ≡ 1 and no labeled contexts in the pool (a target
    arm under ``"ipw"`` or ``"none"`` weighting); the grid spans all outcomes and predictions.
    """
    if len(block.f_u) > 1 or block.f_lc or block.centre:
        raise ValueError(
            "the inversion interval supports one target arm with weighting 'ipw' or 'none', "
            "without include_labeled_contexts"
        )
    Y, f, w, T = block.Y, block.f, block.w, block.n_labeled
    f_u, N = (block.f_u[0], block.n_unlabeled) if block.f_u else (np.zeros(0), 0)
    pooled = np.concatenate([Y, f, f_u])
    grid = np.linspace(pooled.min(), pooled.max(), grid_size)
    w2 = w**2
    S1, S2 = _weighted_cdf(Y, w, grid), _weighted_cdf(Y, w2, grid)
    R1, R2 = _weighted_cdf(f, w, grid), _weighted_cdf(f, w2, grid)
    M2 = _weighted_cdf(np.maximum(Y, f), w2, grid)  # Σ w² 1{Y ≤ θ} 1{f ≤ θ}
    W1, W2 = w.sum(), w2.sum()
    # Moments of a = w (1{Y ≤ θ} − q) and b = w (1{f ≤ θ} − q) over the T rounds.
    mean_a, mean_b = (S1 - q * W1) / T, (R1 - q * W1) / T
    Eaa = ((1 - 2 * q) * S2 + q**2 * W2) / T
    Ebb = ((1 - 2 * q) * R2 + q**2 * W2) / T
    Eab = (M2 - q * (S2 + R2) + q**2 * W2) / T
    var_L = (Eaa - mean_a**2) - 2 * lam * (Eab - mean_a * mean_b) + lam**2 * (Ebb - mean_b**2)
    psi = mean_a - lam * mean_b
    var = var_L / T
    if N and lam != 0:
        F_u = _weighted_cdf(f_u, np.ones(N), grid) / N
        psi = psi + lam * block.s * (F_u - q)
        var = var + lam**2 * block.s**2 * F_u * (1 - F_u) / N
    z = ndtri(1 - alpha / 2)
    kept = np.abs(psi) <= z * np.sqrt(np.maximum(var, 0.0))
    if not kept.any():
        raise ValueError(
            f"no grid value is accepted at alpha={alpha}: the estimating equation has no root "
            "within the data's range"
        )
    return float(grid[kept][0]), float(grid[kept][-1])
