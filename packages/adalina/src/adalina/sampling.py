"""The linear-space representation of a semi-value and its sampling distribution (pure functions).

Every semi-value is linear in the utility: ``phi = sum_S U(S) c(S)`` with, for ``s = |S|``,

    c_i(S) =  w_{s-1} / C(n-1, s-1)   if i ∈ S
    c_i(S) = -w_s / C(n-1, s)         if i ∉ S.

Draw a size ``s`` with probability ``q_s`` and then ``S`` uniformly among the ``C(n, s)`` sets of that
size; then ``a(S) = c(S) / P(S)`` is an unbiased one-sample estimate of ``sum_S c(S) U(S)`` once
multiplied by ``U(S)``:

    a_i(S) =  (n / q_s) w_{s-1} / s        if i ∈ S
    a_i(S) = -(n / q_s) w_s / (n - s)      if i ∉ S.

Adalina's choice ``q_s ∝ sqrt(w_{s-1}^2/s + w_s^2/(n-s))`` makes ``||a(S)||_2 = n Z`` the same for
every ``S`` (``Z`` the normaliser); it minimises ``sum_S ||c(S)||^2 / P(S)``, the quantity the
vector-concentration bound depends on. Sizes ``1..n-1`` by default; ``include_extremes`` (the
Adalina-All variant) also samples ``s = 0`` and ``s = n``, dropping the side that does not exist.
"""

from __future__ import annotations

import math

import numpy as np

from adalina.semivalues import SemiValue, SemiValueLike, check_n_players


def _logsumexp(x: np.ndarray) -> float:
    top = float(np.max(x))
    if not math.isfinite(top):
        return top
    return top + math.log(float(np.sum(np.exp(x - top))))


def size_support(n: int, include_extremes: bool = False) -> np.ndarray:
    """Coalition sizes the sampler draws: ``1..n-1``, or ``0..n`` with ``include_extremes``."""
    return np.arange(0, n + 1) if include_extremes else np.arange(1, n)


def _log_side_norms(n: int, log_w: np.ndarray, include_extremes: bool) -> np.ndarray:
    """``log sqrt(w_{s-1}^2/s + w_s^2/(n-s))`` over the support (the per-size ``||c||`` scale)."""
    sizes = size_support(n, include_extremes)
    terms = np.full((sizes.size, 2), -np.inf)
    inside = sizes >= 1
    outside = sizes <= n - 1
    terms[inside, 0] = 2 * log_w[sizes[inside] - 1] - np.log(sizes[inside])
    terms[outside, 1] = 2 * log_w[sizes[outside]] - np.log(n - sizes[outside])
    top = terms.max(axis=1)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return 0.5 * (safe + np.log(np.exp(terms - safe[:, None]).sum(axis=1)))


def sampling_distribution(
    n: int, semivalue: SemiValueLike = "shapley", *, include_extremes: bool = False
) -> np.ndarray:
    """Adalina's size distribution ``q_s`` over :func:`size_support` (sums to one).

    For the Shapley value this is ``q_s ∝ 1/sqrt(s(n-s))``, the "geomean" sampling of the unbiased
    KernelSHAP matrix-vector estimator.
    """
    n = check_n_players(n)
    log_norms = _log_side_norms(n, SemiValue.coerce(semivalue).log_weights(n), include_extremes)
    return np.exp(log_norms - _logsumexp(log_norms))


def kernel_size_distribution(n: int) -> np.ndarray:
    """The Shapley-kernel size distribution ``q_s ∝ 1/(s(n-s)), s = 1..n-1`` (KernelSHAP, SHAP-IQ)."""
    n = check_n_players(n)
    s = np.arange(1, n, dtype=float)
    q = 1.0 / (s * (n - s))
    return q / q.sum()


def sample_vector_coefficients(
    n: int, semivalue: SemiValueLike, q: np.ndarray, *, include_extremes: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Per-size values ``(inside[s], outside[s])``, ``s = 0..n``, of ``a(S)``'s two entries.

    ``a_i(S) = inside[s]`` for ``i ∈ S`` and ``-outside[s]`` for ``i ∉ S``; sizes outside the
    support of ``q`` (and a side that does not exist) get 0. Works for any ``q`` on the support.
    """
    n = check_n_players(n)
    log_w = SemiValue.coerce(semivalue).log_weights(n)
    sizes = size_support(n, include_extremes)
    q = np.asarray(q, dtype=float)
    if q.shape != sizes.shape:
        raise ValueError(
            f"q must have one probability per size {sizes[0]}..{sizes[-1]} "
            f"(shape {sizes.shape}), got shape {q.shape}"
        )
    if np.any(q < 0) or not math.isclose(float(q.sum()), 1.0, rel_tol=1e-9):
        raise ValueError("q must be a probability vector (entries >= 0 summing to 1)")
    inside = np.zeros(n + 1)
    outside = np.zeros(n + 1)
    # Sizes whose probability underflows to 0 (weights below 1e-300 at n in the thousands) are
    # never drawn; their coefficient stays 0 instead of inf.
    drawable = q > 0
    with np.errstate(divide="ignore"):
        log_q = np.log(q)
    has_in = (sizes >= 1) & drawable
    has_out = (sizes <= n - 1) & drawable
    s_in, s_out = sizes[has_in], sizes[has_out]
    inside[s_in] = np.exp(math.log(n) + log_w[s_in - 1] - np.log(s_in) - log_q[has_in])
    outside[s_out] = np.exp(math.log(n) + log_w[s_out] - np.log(n - s_out) - log_q[has_out])
    return inside, outside


def sample_vectors(masks: np.ndarray, inside: np.ndarray, outside: np.ndarray) -> np.ndarray:
    """``a(S)`` for each row of a boolean ``(batch, n)`` matrix of coalitions."""
    sizes = masks.sum(axis=1)
    return np.where(masks, inside[sizes][:, None], -outside[sizes][:, None])


def draw_coalitions(
    rng: np.random.Generator, m: int, n: int, q: np.ndarray, sizes: np.ndarray
) -> np.ndarray:
    """``m`` coalitions: a size from ``q`` over ``sizes``, then a uniform set of that size.

    Each coalition consumes exactly ``n + 1`` uniforms (one for the size by inverse CDF, ``n`` random
    keys: the ``s`` smallest are the members), so a stream cut into batches of any size gives the
    same coalitions.
    """
    u = rng.random((m, n + 1))
    cdf = np.cumsum(q)
    cdf[-1] = 1.0
    drawn = sizes[np.minimum(np.searchsorted(cdf, u[:, 0], side="right"), sizes.size - 1)]
    keys = u[:, 1:]
    masks = np.zeros((m, n), dtype=bool)
    # the s players with the smallest keys form the set: a partition per size, O(n) per row
    # instead of a full sort
    for s in np.unique(drawn):
        rows = np.flatnonzero(drawn == s)
        if s == n:
            masks[rows] = True
        elif s > 0:
            block = keys[rows]
            kth = np.partition(block, s - 1, axis=1)[:, s - 1 : s]
            masks[rows] = block <= kth
    return masks
