"""Target arm weights ν and the weights w_t of the labeled rounds, assembled into :class:`Block`s.

* ``"ipw"`` (default, spec §2.2): ``w_t = ν(A_t|X_t) / π_t(A_t|X_t)``, ``s = 1``. Consistent for any
  policy with a propensity floor whose inverse propensities stabilise.
* ``"sqrt_stabilized"`` [R, unverified alternative]: Zhang–Janson–Murphy's square-root weights,
  ``w_t = ν(A_t) / sqrt(π_t(A_t) π_s(A_t))`` with a stabilising policy ``π_s`` (uniform by default),
  so that ``w_t = ρ_t`` when the policy equals ``π_s``. ``E[w_t g | history] = sqrt(π_t/π_s) E[g]`` is
  a random multiple of the target, so the unlabeled term is scaled by ``s = mean(w)`` and the
  conditional variances ``π_t w_t²`` no longer depend on the policy — the martingale CLT needs no
  policy convergence. Valid for a single target arm when the policy does not depend on the context.
* ``include_labeled_contexts`` (IPW only, spec §2.2): the labeled contexts join the pool with their
  predictions for every target arm (AIPW-style), the pool weighted ``N/(N+T)`` and the labeled
  contexts ``T/(N+T)``; each round's influence then includes its own pool term.
* ``"none"``: ignore the adaptivity — the rounds that played the target arm taken as an i.i.d. sample
  (PPI++ on that subsample). The baseline that loses coverage.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from ppai.estimating import Block
from ppai.inputs import AdaptiveData
from ppai.problems import Array

Weighting = Literal["ipw", "sqrt_stabilized", "none"]
WEIGHTINGS: tuple[str, ...] = ("ipw", "sqrt_stabilized", "none")
TargetPolicy = Callable[[Array | None], Array] | Sequence[float] | np.ndarray


def policy_matrix(policy: TargetPolicy, X: Array | None, n: int, K: int, name: str) -> Array:
    """``(n, K)`` probabilities of a target policy: a callable of the contexts or a fixed vector."""
    if callable(policy):
        P = np.asarray(policy(X), dtype=float)
    else:
        P = np.broadcast_to(np.asarray(policy, dtype=float), (n, K))
    if P.shape != (n, K):
        raise ValueError(
            f"target_policy must give {name} probabilities of shape {(n, K)}, got {P.shape}"
        )
    if np.any(P < 0) or np.any(np.abs(P.sum(1) - 1) > 1e-6) or not np.all(np.isfinite(P)):
        raise ValueError(
            f"target_policy must give finite non-negative probabilities summing to 1 on {name}"
        )
    return P


def _arm_block(data: AdaptiveData, arm: int, weighting: str, stabilizer: Array) -> Block:
    played = np.equal(data.A, arm)
    if not played.any():
        raise ValueError(f"no labeled samples for arm {arm}: it was never played")
    f_u = data.pool_pred(arm)
    ones = (np.ones(data.N),)
    if weighting == "none":
        X = None if data.X is None else data.X[played]
        return Block(
            X, data.Y[played], data.f[played], np.ones(int(played.sum())), data.X_u, (f_u,), ones
        )
    if weighting == "ipw":
        return Block(data.X, data.Y, data.f, played / data.pi, data.X_u, (f_u,), ones)
    w = played / np.sqrt(data.pi * stabilizer[arm])
    return Block(data.X, data.Y, data.f, w, data.X_u, (f_u,), ones, s=float(w.mean()), centre=True)


def _with_labeled_contexts(block: Block, data: AdaptiveData, arms: list[int], nu_l: Array) -> Block:
    if data.f_all is None:
        raise ValueError(
            "include_labeled_contexts needs pred_labeled as a (T, K) matrix: predictions for every "
            "arm on the labeled contexts"
        )
    T, N = data.T, data.N
    return dataclasses.replace(
        block,
        s=N / (N + T),
        f_lc=tuple(data.f_all[:, a] for a in arms),
        nu_lc=tuple(nu_l[:, a] for a in arms),
        s_lc=T / (N + T),
    )


def build_blocks(
    data: AdaptiveData,
    *,
    target_arms: Sequence[int] = (),
    target_policy: TargetPolicy | None = None,
    weighting: str = "ipw",
    stabilizing_policy: Sequence[float] | None = None,
    include_labeled_contexts: bool = False,
) -> list[Block]:
    """One :class:`Block` per target arm, or one for the target policy."""
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")
    if include_labeled_contexts and weighting != "ipw":
        raise ValueError(f"include_labeled_contexts needs weighting='ipw', got {weighting!r}")
    if target_policy is not None:
        if weighting != "ipw":
            raise ValueError(f"a target policy needs weighting='ipw', got {weighting!r}")
        nu_l = policy_matrix(target_policy, data.X, data.T, data.K, "the labeled contexts")
        nu_u = policy_matrix(target_policy, data.X_u, data.N, data.K, "the unlabeled contexts")
        w = nu_l[np.arange(data.T), data.A] / data.pi
        arms = [a for a in range(data.K) if nu_u[:, a].any() or nu_l[:, a].any()]
        block = Block(
            data.X,
            data.Y,
            data.f,
            w,
            data.X_u,
            tuple(data.pool_pred(a) for a in arms),
            tuple(nu_u[:, a] for a in arms),
        )
        return (
            [_with_labeled_contexts(block, data, arms, nu_l)]
            if include_labeled_contexts
            else [block]
        )
    if not target_arms:
        raise ValueError(
            "give a target arm (target_arm=...) or a target policy (target_policy=...)"
        )
    if weighting == "none" and len(target_arms) > 1:
        raise ValueError("weighting='none' (PPI++ ignoring adaptivity) supports one target arm")
    if stabilizing_policy is None:
        stabilizer = np.full(data.K, 1.0 / data.K)
    else:
        stabilizer = np.asarray(stabilizing_policy, dtype=float)
        if (
            stabilizer.shape != (data.K,)
            or np.any(stabilizer <= 0)
            or abs(stabilizer.sum() - 1) > 1e-6
        ):
            raise ValueError(
                f"stabilizing_policy must be {data.K} positive probabilities summing to 1, "
                f"got {stabilizer}"
            )
    blocks = [_arm_block(data, int(a), weighting, stabilizer) for a in target_arms]
    if include_labeled_contexts:
        # A target arm's ν is a point mass on it, at every labeled context.
        blocks = [
            _with_labeled_contexts(b, data, [int(a)], np.tile(np.eye(data.K)[a], (data.T, 1)))
            for b, a in zip(blocks, target_arms, strict=True)
        ]
    return blocks


def _sample_weights(w: Any, n: int, name: str) -> Array | None:
    """``ppi_py``'s sample weights: ``None``, or n finite non-negative values scaled to sum to n."""
    if w is None:
        return None
    arr = np.asarray(w, dtype=float)
    if arr.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},) (one weight per row), got {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or not arr.sum() > 0:
        raise ValueError(f"{name} must be finite, non-negative and not all zero, got {w!r}")
    return arr / arr.sum() * n


def with_sample_weights(
    blocks: list[Block],
    data: AdaptiveData,
    w: Any,
    w_unlabeled: Any,
    *,
    weighting: str,
    target_arms: Sequence[int] = (),
) -> list[Block]:
    """Multiply ``ppi_py``-style sample weights into the blocks: ``w`` (length T) into the labeled
    weights, ``w_unlabeled`` (length N) into the pool's ν. Each is first scaled to sum to its sample
    size, as ``ppi_py`` does (on the played rounds for ``weighting="none"``)."""
    wl = _sample_weights(w, data.T, "w")
    wu = _sample_weights(w_unlabeled, data.N, "w_unlabeled")
    if wl is None and wu is None:
        return blocks
    if weighting == "sqrt_stabilized":
        raise ValueError("sample weights w/w_unlabeled need weighting='ipw' or 'none'")
    out = []
    for i, b in enumerate(blocks):
        wb = wl
        if wl is not None and weighting == "none":
            sub = wl[np.equal(data.A, target_arms[i])]
            wb = sub / sub.sum() * sub.shape[0]
        out.append(
            dataclasses.replace(
                b,
                w=b.w if wb is None else b.w * wb,
                nu_u=b.nu_u if wu is None else tuple(nu * wu for nu in b.nu_u),
                nu_lc=b.nu_lc if wl is None else tuple(nu * wl for nu in b.nu_lc),
            )
        )
    return out
