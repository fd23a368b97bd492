"""Greedy MAP selection under a determinantal point process (upstream ``DPPEnsembleHOF``).

``L = diag(q) S diag(q)`` with quality ``q`` and similarity ``S``; each step adds the candidate with
the largest Schur complement ``L_cc − L_{c,Sel} (L_{Sel,Sel} + 1e-8 I)⁺ L_{Sel,c}``, which is the
gain in ``log det L_Sel`` (the log of that complement).
"""

from __future__ import annotations

import numpy as np

JITTER = 1e-8


def cosine_similarity(features: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(features, axis=1, keepdims=True)
    unit = features / np.where(norms > 0, norms, 1.0)
    return unit @ unit.T


def dpp_greedy_select(
    quality: np.ndarray, features: np.ndarray, k: int, similarity: str = "cosine"
) -> list[int]:
    """Indices of ``k`` candidates chosen greedily; first the highest ``L_cc = q_c² S_cc``.

    ``features`` is (n_candidates × d) for ``similarity="cosine"`` (upstream: the residual vectors
    ``ŷ_c − y``) or the similarity matrix itself for ``similarity="precomputed"``.
    """
    q = np.asarray(quality, dtype=np.float64)
    if q.ndim != 1 or not np.all(np.isfinite(q)):
        raise ValueError(f"quality must be a finite 1-d array, got shape {q.shape}")
    if similarity == "cosine":
        S = cosine_similarity(np.asarray(features, dtype=np.float64))
    elif similarity == "precomputed":
        S = np.asarray(features, dtype=np.float64)
    else:
        raise ValueError(f"similarity must be 'cosine' or 'precomputed', got {similarity!r}")
    if S.shape != (q.size, q.size):
        raise ValueError(f"similarity is {S.shape}, expected ({q.size}, {q.size})")
    if not 1 <= k <= q.size:
        raise ValueError(f"k must be in [1, {q.size}], got {k}")
    L = q[:, None] * S * q[None, :]
    selected = [int(np.argmax(np.diag(L)))]
    while len(selected) < k:
        inv = np.linalg.pinv(L[np.ix_(selected, selected)] + JITTER * np.eye(len(selected)))
        cross = L[:, selected]
        gain = np.diag(L) - np.einsum("cs,st,ct->c", cross, inv, cross)
        gain[selected] = -np.inf
        selected.append(int(np.argmax(gain)))
    return selected
