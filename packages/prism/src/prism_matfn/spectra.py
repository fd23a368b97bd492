"""Test matrices with the singular-value spectra the paper and the reproduction use."""

from __future__ import annotations

import numpy as np
import torch

SPECTRA: tuple[str, ...] = ("gaussian", "student_t", "log_uniform", "htmp")


def _orthonormal(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    Q, R = np.linalg.qr(rng.standard_normal((rows, cols)))
    return Q * np.sign(np.diag(R))


def spectrum_matrix(
    spectrum: str,
    m: int,
    n: int,
    *,
    seed: int = 0,
    df: float = 2.5,
    lower: float = 1e-3,
    kappa: float = 0.5,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """An ``m×n`` matrix whose spectrum is named by ``spectrum``.

    - ``"gaussian"``: i.i.d. N(0, 1) entries (Marchenko–Pastur singular values; σ_min → 0 when square).
    - ``"student_t"``: i.i.d. Student-t entries with ``df`` degrees of freedom (heavy-tailed entries).
    - ``"log_uniform"``: ``U diag(σ) Vᵀ`` with σ log-uniform on ``[lower, 1]`` and Haar ``U, V``.
    - ``"htmp"``: heavy-tailed Marchenko–Pastur, ``Z diag(√τ)`` with Gaussian ``Z`` and column variances
      ``τ ~ InvGamma(κ, κ)`` — small ``κ`` gives heavy tails, large ``κ`` tends to plain MP. This is a
      reconstruction of Hodgkinson–Wang–Mahoney's model, not the paper's exact draw.
    """
    rng = np.random.default_rng(seed)
    if spectrum == "gaussian":
        G = rng.standard_normal((m, n))
    elif spectrum == "student_t":
        G = rng.standard_t(df, size=(m, n))
    elif spectrum == "log_uniform":
        k = min(m, n)
        s = np.exp(rng.uniform(np.log(lower), 0.0, k))
        G = (_orthonormal(rng, m, k) * s) @ _orthonormal(rng, n, k).T
    elif spectrum == "htmp":
        tau = 1.0 / rng.gamma(kappa, 1.0 / kappa, n)
        G = rng.standard_normal((m, n)) * np.sqrt(tau)
    else:
        raise ValueError(f"spectrum must be one of {SPECTRA}, got {spectrum!r}")
    return torch.from_numpy(G).to(dtype)


def spd_matrix(spectrum: str, n: int, *, seed: int = 0, lower: float = 1e-4) -> torch.Tensor:
    """A symmetric positive definite ``n×n`` matrix: ``"log_uniform"`` eigenvalues on ``[lower, 1]`` or
    ``"wishart"`` (the Gram ``ZᵀZ/4n`` of a ``4n×n`` Gaussian ``Z``, Marchenko–Pastur eigenvalues)."""
    rng = np.random.default_rng(seed)
    if spectrum == "log_uniform":
        w = np.exp(rng.uniform(np.log(lower), 0.0, n))
        Q = _orthonormal(rng, n, n)
        A = (Q * w) @ Q.T
    elif spectrum == "wishart":
        Z = rng.standard_normal((4 * n, n))
        A = Z.T @ Z / (4 * n)
    else:
        raise ValueError(f"spectrum must be 'log_uniform' or 'wishart', got {spectrum!r}")
    return torch.from_numpy((A + A.T) / 2)
