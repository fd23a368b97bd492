"""Small random connectomes for the tests (a plain module: importable under importlib mode)."""

from __future__ import annotations

import numpy as np
import torch


def random_sc(n: int, density: float = 0.5, seed: int = 0) -> torch.Tensor:
    """A connected weighted symmetric SC: a ring plus random chords, zero diagonal."""
    rng = np.random.default_rng(seed)
    w = rng.uniform(0.2, 1.0, size=(n, n)) * (rng.random((n, n)) < density)
    ring = np.roll(np.eye(n), 1, axis=1) * rng.uniform(0.2, 1.0, size=(n, 1))
    w = np.triu(w + ring + ring.T, 1)
    return torch.tensor(w + w.T, dtype=torch.float64)


def random_fc(n: int, seed: int = 0) -> torch.Tensor:
    rng = np.random.default_rng(seed + 100)
    x = rng.standard_normal((3 * n, n)) + rng.standard_normal((3 * n, 1))
    return torch.tensor(np.corrcoef(x.T), dtype=torch.float64)


def edges(sc: torch.Tensor) -> torch.Tensor:
    u, v = torch.where(torch.triu(sc > 0, 1))
    return torch.stack([u, v])


def official_energy(sc, fc, g, delta=1e-6, ridge=1e-6, scale=100.0):
    """The official dial/routing.py double solve, re-derived in numpy (float64)."""
    s, f, g = (np.asarray(x, dtype=np.float64) for x in (sc, fc, g))
    n = s.shape[0]
    u, v = np.nonzero(np.triu(s > 0, 1))
    inc = np.zeros((len(u), n))
    inc[np.arange(len(u)), u] = 1.0
    inc[np.arange(len(u)), v] = -1.0
    lap_g = inc.T @ np.diag(g) @ inc + delta * np.eye(n)
    t = np.abs(0.5 * (f + f.T))
    np.fill_diagonal(t, 0.0)
    lap_t = np.diag(t.sum(1)) - t + ridge * np.eye(n)
    x = np.linalg.solve(lap_g, inc.T)
    z = np.linalg.solve(lap_g, lap_t @ x)
    return scale * 2.0 * g * (inc * z.T).sum(1)


def signed_fc(n: int, seed: int = 0) -> torch.Tensor:
    """A filtered FC as the paper feeds it: correlations of independent series (both signs),
    the strongest 30 % by |value| kept (``filter_fc``)."""
    from afrnet.preprocess import filter_fc

    x = np.random.default_rng(seed + 200).standard_normal((2 * n, n))
    return torch.tensor(filter_fc(np.corrcoef(x.T)), dtype=torch.float64)


def components_projector(adjacency: np.ndarray) -> np.ndarray:
    """``Σ_c 1_c 1_cᵀ / |c|`` from scipy's connected components (the null-space oracle)."""
    from scipy.sparse.csgraph import connected_components

    _, labels = connected_components(adjacency != 0, directed=False)
    same = labels[:, None] == labels[None, :]
    return same / same.sum(1, keepdims=True)
