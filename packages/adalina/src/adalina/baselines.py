"""The paper's baselines, under the same ``approximate(budget, game)`` interface and budget rules.

* :class:`ShapIQ` (order 1, any semi-value; Fumagalli et al. 2023): kernel sizes
  ``q_s ∝ 1/(s(n-s))`` and ``γ = U(∅)``, written in its closed form.
* :class:`KernelSHAPUnbiased` (Covert & Lee 2021, Eq. 9; Shapley only): the constrained regression
  solution with the exact ``A = E[z z^T]`` and a sampled ``b``.
* :class:`MSR` (Wang & Jia 2023; weighted Banzhaf only): ``S ~ Bernoulli(p)^n``,
  ``phi_i = mean(U | i ∈ S) - mean(U | i ∉ S)``.
* :class:`AME` (Lin et al. 2022): ``t ~ Beta(β, α)`` (``t = p`` for weighted Banzhaf),
  ``S ~ Bernoulli(t)^n``, ``a_i = U/t`` if ``i ∈ S`` else ``-U/(1-t)``.
* :class:`OFA` (Li & Yu 2024, one sample fits all): Adalina's sizes, stratified means per
  (player, size): O(n^2) memory.
* :class:`PermutationSampling` (Castro et al. 2009; Shapley only): ``n - 1`` queries per permutation
  plus the two extremes once.

:class:`~adalina.estimators.MSRProb` and the fixed-γ :class:`~adalina.estimators.LinearApprox` live
in :mod:`adalina.estimators`.
"""

from __future__ import annotations

import numpy as np

from adalina.estimators import (
    LinearSpaceEstimator,
    NotFittedError,
    RandomState,
    SemiValueApproximator,
    StoppingRule,
    _ExtremesMixin,
)
from adalina.sampling import draw_coalitions, kernel_size_distribution, sampling_distribution
from adalina.semivalues import SemiValue, SemiValueLike, check_n_players


def _mean_stderr(total: np.ndarray, total_sq: np.ndarray, count: np.ndarray | int) -> np.ndarray:
    """Standard error of a mean from its running sum and sum of squares (``count >= 2``)."""
    count = np.asarray(count, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / count
        var = np.maximum(total_sq / count - mean**2, 0.0) * count / (count - 1)
        return np.where(count >= 2, np.sqrt(var / count), 0.0)


def _require(sv: SemiValue, kind: str, estimator: str) -> None:
    if sv.kind != kind:
        raise ValueError(f"{estimator} is defined for the {kind} value only, got {sv.name}")


class ShapIQ(LinearSpaceEstimator):
    """SHAP-IQ for order 1 (any semi-value): ``a_i = 2 H_{n-1} (n-s) w_{s-1}`` if ``i ∈ S``,
    ``-2 H_{n-1} s w_s`` otherwise, ``γ = U(∅)``, sizes ``q_s ∝ 1/(s(n-s))``."""

    name = "shap-iq"

    def __init__(
        self,
        n: int,
        semivalue: SemiValueLike = "shapley",
        *,
        budget: str = "draws",
        stopping: StoppingRule | None = None,
        batch_size: int = 100,
        random_state: RandomState = None,
    ) -> None:
        super().__init__(
            n,
            semivalue,
            gamma="empty",
            budget=budget,
            stopping=stopping,
            batch_size=batch_size,
            random_state=random_state,
        )

    def _q(self) -> np.ndarray:
        return kernel_size_distribution(self._n)

    def _coefficients(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = self._n
        w = self._sv.weights(n)
        harmonic = float(np.sum(1.0 / np.arange(1, n)))
        s = np.arange(1, n)
        inside = np.zeros(n + 1)
        outside = np.zeros(n + 1)
        inside[s] = 2 * harmonic * (n - s) * w[s - 1]
        outside[s] = 2 * harmonic * s * w[s]
        return inside, outside


class KernelSHAPUnbiased(_ExtremesMixin, SemiValueApproximator):
    """Unbiased KernelSHAP (Covert & Lee 2021): Shapley value only, O(n) state.

    ``phi = A^{-1}(b - 1 (1ᵀA^{-1}b - (U([n]) - U(∅))) / 1ᵀA^{-1}1)`` with ``A = E[z zᵀ]`` known in
    closed form under the Shapley-kernel distribution and ``b = mean z (U(z) - U(∅))`` sampled.
    """

    name = "kernelshap-unbiased"

    def _validate(self) -> None:
        super()._validate()
        _require(self._sv, "shapley", "unbiased KernelSHAP")
        n = self._n
        self._size_q = kernel_size_distribution(n)
        s = np.arange(1, n, dtype=float)
        p_one = float(np.sum(self._size_q * s / n))
        p_two = float(np.sum(self._size_q * s * (s - 1) / (n * (n - 1))))
        # A = (p_one - p_two) I + p_two 11ᵀ; Sherman-Morrison gives A^{-1} in O(n).
        self._diag, self._off = p_one - p_two, p_two

    def _solve(self, v: np.ndarray) -> np.ndarray:
        return (v - self._off * v.sum() / (self._diag + self._n * self._off)) / self._diag

    def _reset(self) -> None:
        super()._reset()
        self._ref, self._u_empty, self._u_full = None, None, None
        self._sum_z = np.zeros(self._n)
        self._sum_zu = np.zeros(self._n)
        # for standard errors: with c = U - U(∅) and s = |S|, the estimate is the mean of
        # t_i = c (z_i - s/n) / diag (the projected A^{-1} is (I - 11ᵀ/n) / diag), plus a constant
        self._sum_cs = 0.0
        self._sum_c2z, self._sum_c2sz = np.zeros(self._n), np.zeros(self._n)
        self._sum_c2s2 = 0.0
        self._m = 0

    def _draw(self, k: int) -> np.ndarray:
        return draw_coalitions(self._rng, k, self._n, self._size_q, np.arange(1, self._n))

    def _update(self, masks: np.ndarray, values: np.ndarray) -> None:
        masks, centred = self._take_extremes(masks, values)
        self._sum_z += masks.sum(axis=0)
        self._sum_zu += centred @ masks
        self._m += masks.shape[0]
        c = centred - (self._u_empty or 0.0)  # approximate queries U(∅) in the first batch
        s = masks.sum(axis=1).astype(float)
        self._sum_cs += float(c @ s)
        self._sum_c2z += (c * c) @ masks
        self._sum_c2sz += (c * c * s) @ masks
        self._sum_c2s2 += float((c * c) @ (s * s))

    def _std_error(self) -> np.ndarray | None:
        if self._m < 2 or self._u_empty is None:
            return None
        n, m = self._n, self._m
        sum_cz = self._sum_zu - self._u_empty * self._sum_z
        mean = (sum_cz - self._sum_cs / n) / m
        mean_sq = (self._sum_c2z - 2 * self._sum_c2sz / n + self._sum_c2s2 / n**2) / m
        var = np.maximum(mean_sq - mean**2, 0.0) * m / (m - 1)
        return np.sqrt(var / m) / self._diag

    def _estimate(self) -> np.ndarray:
        u_empty, u_full = self._extremes()
        if self._m == 0:
            raise NotFittedError("no sampled coalition seen yet")
        b = (self._sum_zu - u_empty * self._sum_z) / self._m
        a_inv_b = self._solve(b)
        a_inv_1 = self._solve(np.ones(self._n))
        return a_inv_b - a_inv_1 * (a_inv_b.sum() - (u_full - u_empty)) / a_inv_1.sum()


class MSR(SemiValueApproximator):
    """Maximum sample reuse for weighted Banzhaf values: every query informs every player.

    A player never seen inside (or outside) a sampled coalition gets the overall mean utility for
    that side, so the estimate exists from the first query on.
    """

    name = "msr"
    n_extreme_queries = 0

    def _validate(self) -> None:
        super()._validate()
        _require(self._sv, "banzhaf", "MSR")

    @property
    def min_budget(self) -> int:
        return 2

    def _reset(self) -> None:
        super()._reset()
        n = self._n
        self._ref: float | None = None
        self._sum_in, self._cnt_in = np.zeros(n), np.zeros(n)
        self._sq_in = np.zeros(n)
        self._sum_all, self._sq_all, self._m = 0.0, 0.0, 0

    def _draw(self, k: int) -> np.ndarray:
        assert self._sv.p is not None  # checked in _validate
        return self._rng.random((k, self._n)) < self._sv.p

    def _update(self, masks: np.ndarray, values: np.ndarray) -> None:
        if self._ref is None:
            self._ref = float(values[0])
        centred = values - self._ref
        self._sum_in += centred @ masks
        self._sq_in += (centred * centred) @ masks
        self._cnt_in += masks.sum(axis=0)
        self._sum_all += float(centred.sum())
        self._sq_all += float(centred @ centred)
        self._m += masks.shape[0]

    def _std_error(self) -> np.ndarray | None:
        # the two means use disjoint samples: their variances add
        if self._m < 2:
            return None
        cnt_out = self._m - self._cnt_in
        inside = _mean_stderr(self._sum_in, self._sq_in, self._cnt_in)
        outside = _mean_stderr(self._sum_all - self._sum_in, self._sq_all - self._sq_in, cnt_out)
        return np.sqrt(inside**2 + outside**2)

    def _estimate(self) -> np.ndarray:
        mean_all = self._sum_all / self._m
        cnt_out = self._m - self._cnt_in
        sum_out = self._sum_all - self._sum_in
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_in = np.where(self._cnt_in > 0, self._sum_in / self._cnt_in, mean_all)
            mean_out = np.where(cnt_out > 0, sum_out / cnt_out, mean_all)
        return mean_in - mean_out


class AME(SemiValueApproximator):
    """Average marginal effect estimator (linear form of the official ``linearAME``), ``γ = 0``.

    Its variance is infinite for the Shapley value (``E[1/t]`` diverges for ``t ~ U(0, 1)``): a
    baseline, not a recommendation.
    """

    name = "ame"
    n_extreme_queries = 0

    def _reset(self) -> None:
        super()._reset()
        self._sum_au = np.zeros(self._n)
        self._sum_au_sq = np.zeros(self._n)
        self._m = 0

    def _draw(self, k: int) -> np.ndarray:
        sv = self._sv
        if sv.kind == "banzhaf":
            t = np.full(k, sv.p)
        elif sv.kind == "shapley":
            t = self._rng.uniform(size=k)
        else:
            assert sv.alpha is not None and sv.beta is not None
            t = self._rng.beta(sv.beta, sv.alpha, size=k)
        # t of exactly 0 or 1 has probability zero but appears in floating point for extreme
        # Beta parameters; keep 1/t finite.
        t = np.clip(t, 1e-12, 1 - 1e-12)
        self._pending_t = t
        return self._rng.random((k, self._n)) < t[:, None]

    def _update(self, masks: np.ndarray, values: np.ndarray) -> None:
        t = self._pending_t[: masks.shape[0]]
        a = np.where(masks, 1.0 / t[:, None], -1.0 / (1.0 - t[:, None]))
        self._sum_au += values @ a
        self._sum_au_sq += (values * values) @ (a * a)
        self._m += masks.shape[0]

    def _estimate(self) -> np.ndarray:
        return self._sum_au / self._m

    def _std_error(self) -> np.ndarray | None:
        return None if self._m < 2 else _mean_stderr(self._sum_au, self._sum_au_sq, self._m)


class OFA(_ExtremesMixin, SemiValueApproximator):
    """One-sample-fits-all: Adalina's size distribution, stratified per (player, size) means.

    ``phi_i = sum_s [w_{s-1} mean(U | i ∈ S, |S| = s) - w_s mean(U | i ∉ S, |S| = s)]`` with the two
    extreme utilities exact. An empty stratum takes the mean of all sampled utilities. O(n^2) state.
    """

    name = "ofa"

    def _validate(self) -> None:
        super()._validate()
        self._size_q = sampling_distribution(self._n, self._sv)
        self._w = self._sv.weights(self._n)

    def _reset(self) -> None:
        super()._reset()
        n = self._n
        self._ref, self._u_empty, self._u_full = None, None, None
        self._sum_in, self._cnt_in = np.zeros(n * (n + 1)), np.zeros(n * (n + 1))
        self._sum_out, self._cnt_out = np.zeros(n * (n + 1)), np.zeros(n * (n + 1))
        self._sq_in, self._sq_out = np.zeros(n * (n + 1)), np.zeros(n * (n + 1))
        self._sum_all, self._m = 0.0, 0

    def _draw(self, k: int) -> np.ndarray:
        return draw_coalitions(self._rng, k, self._n, self._size_q, np.arange(1, self._n))

    def _update(self, masks: np.ndarray, values: np.ndarray) -> None:
        masks, centred = self._take_extremes(masks, values)
        n, size = self._n, (self._n + 1) * self._n
        sizes = masks.sum(axis=1)
        # flat stratum index player * (n + 1) + size, for every (coalition, player) pair
        flat = np.arange(n)[None, :] * (n + 1) + sizes[:, None]
        u = np.broadcast_to(centred[:, None], masks.shape)
        self._sum_in += np.bincount(flat[masks], u[masks], minlength=size)
        self._cnt_in += np.bincount(flat[masks], minlength=size)
        self._sum_out += np.bincount(flat[~masks], u[~masks], minlength=size)
        self._cnt_out += np.bincount(flat[~masks], minlength=size)
        self._sq_in += np.bincount(flat[masks], u[masks] ** 2, minlength=size)
        self._sq_out += np.bincount(flat[~masks], u[~masks] ** 2, minlength=size)
        self._sum_all += float(centred.sum())
        self._m += masks.shape[0]

    def _estimate(self) -> np.ndarray:
        u_empty, u_full = self._extremes()
        if self._m == 0:
            raise NotFittedError("no sampled coalition seen yet")
        n, w, fallback = self._n, self._w, self._sum_all / self._m
        shape = (n, n + 1)
        cnt_in, cnt_out = self._cnt_in.reshape(shape), self._cnt_out.reshape(shape)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_in = np.where(cnt_in > 0, self._sum_in.reshape(shape) / cnt_in, fallback)
            mean_out = np.where(cnt_out > 0, self._sum_out.reshape(shape) / cnt_out, fallback)
        s = np.arange(1, n)
        phi = mean_in[:, s] @ w[s - 1] - mean_out[:, s] @ w[s]
        return phi + w[n - 1] * u_full - w[0] * u_empty

    def _std_error(self) -> np.ndarray | None:
        # strata are sampled independently given their counts; a stratum seen fewer than twice
        # contributes no variance (it is rare once m is a few times n^2)
        if self._m < 2:
            return None
        n, w = self._n, self._w
        shape = (n, n + 1)
        se_in = _mean_stderr(self._sum_in, self._sq_in, self._cnt_in).reshape(shape)
        se_out = _mean_stderr(self._sum_out, self._sq_out, self._cnt_out).reshape(shape)
        s = np.arange(1, n)
        return np.sqrt(se_in[:, s] ** 2 @ w[s - 1] ** 2 + se_out[:, s] ** 2 @ w[s] ** 2)


class PermutationSampling(_ExtremesMixin, SemiValueApproximator):
    """Permutation sampling for the Shapley value (an extra anchor; not in the paper's comparison).

    Each permutation queries its ``n - 1`` proper prefixes; ``U(∅)`` and ``U([n])`` are queried once.
    A budget that does not divide into whole permutations leaves the remainder unspent
    (``n_queries_ <= budget``).
    """

    name = "permutation"

    @property
    def _unit(self) -> int:  # type: ignore[override]
        return self._n - 1

    @property
    def min_budget(self) -> int:
        return 2 + check_n_players(self.n) - 1

    def _validate(self) -> None:
        super()._validate()
        _require(self._sv, "shapley", "permutation sampling")

    def _reset(self) -> None:
        super()._reset()
        n = self._n
        self._ref, self._u_empty, self._u_full = None, None, None
        self._acc, self._first, self._last = np.zeros(n), np.zeros(n), np.zeros(n)
        self._acc_sq = np.zeros(n)
        self._perms = 0

    def _draw(self, k: int) -> np.ndarray:
        n = self._n
        count = k // (n - 1)
        rank = np.argsort(np.argsort(self._rng.random((count, n)), axis=1), axis=1)
        # prefix j (size j + 1) holds the players ranked <= j
        masks = rank[:, None, :] <= np.arange(n - 1)[None, :, None]
        return masks.reshape(count * (n - 1), n)

    def _update(self, masks: np.ndarray, values: np.ndarray) -> None:
        masks, centred = self._take_extremes(masks, values)
        n = self._n
        chains = masks.reshape(-1, n - 1, n)
        v = centred.reshape(-1, n - 1)
        # position of each player in its permutation: the player added at step j sits in n-1-j
        # of the prefixes, the last one in none
        rank = (n - 1) - chains.sum(axis=1)
        steps = np.diff(v, axis=1, prepend=0.0, append=0.0)  # v_0, v_1 - v_0, ..., -v_{n-2}
        taken = np.take_along_axis(steps, rank, axis=1)
        self._acc += taken.sum(axis=0)
        self._first += (rank == 0).sum(axis=0)
        self._last += (rank == n - 1).sum(axis=0)
        self._perms += chains.shape[0]
        # each permutation's marginal contributions, the extremes included (queried first)
        u_empty, u_full = self._u_empty or 0.0, self._u_full or 0.0
        full = taken + u_full * (rank == n - 1) - u_empty * (rank == 0)
        self._acc_sq += (full * full).sum(axis=0)

    def _std_error(self) -> np.ndarray | None:
        if self._perms < 2:
            return None
        return _mean_stderr(self._estimate() * self._perms, self._acc_sq, self._perms)

    def _estimate(self) -> np.ndarray:
        u_empty, u_full = self._extremes()
        if self._perms == 0:
            raise NotFittedError("no permutation sampled yet")
        return (self._acc + u_full * self._last - u_empty * self._first) / self._perms


class KernelSHAPMV(_ExtremesMixin, SemiValueApproximator):
    """KernelSHAP as an approximate matrix-vector product (``kernelSHAP_MV``, arXiv 2506.05216).

    Shapley value only. Sizes ``s = 1..n-1`` from ``sampling``: ``"geomean"`` (``q_s ∝
    1/sqrt(s(n-s))``, the variant in the paper's figures and the official default; it equals
    Adalina's Shapley ``q``), ``"kernel"`` (``∝ 1/(s(n-s))``) or ``"leverage"`` (uniform). The
    estimate is ``mean[(1_S - s/n)(U(S) - c s) scale_s] + (U([n]) - U(∅))/n`` with
    ``c = (U([n]) - U(∅))/n`` (``control="diff"``, the default) or ``c = 0`` (``"zero"``, the
    unbiased KernelSHAP of Covert & Lee for ``sampling="kernel"``). O(n) state.
    """

    name = "kernelshap-mv"
    SAMPLINGS = ("geomean", "kernel", "leverage")

    def __init__(
        self,
        n: int,
        semivalue: SemiValueLike = "shapley",
        *,
        sampling: str = "geomean",
        control: str = "diff",
        budget: str = "draws",
        stopping: StoppingRule | None = None,
        batch_size: int = 100,
        random_state: RandomState = None,
    ) -> None:
        super().__init__(
            n,
            semivalue,
            budget=budget,
            stopping=stopping,
            batch_size=batch_size,
            random_state=random_state,
        )
        self.sampling = sampling
        self.control = control

    def _validate(self) -> None:
        super()._validate()
        _require(self._sv, "shapley", "KernelSHAP-MV")
        if self.sampling not in self.SAMPLINGS:
            raise ValueError(f"sampling must be one of {self.SAMPLINGS}, got {self.sampling!r}")
        if self.control not in ("diff", "zero"):
            raise ValueError(f"control must be 'diff' or 'zero', got {self.control!r}")
        n = self._n
        s = np.arange(1, n, dtype=float)
        if self.sampling == "geomean":
            root = 1.0 / np.sqrt(s * (n - s))
            self._size_q, self._scale = root / root.sum(), root * root.sum() * n
        elif self.sampling == "kernel":
            self._size_q = kernel_size_distribution(n)
            self._scale = np.full(n - 1, 2.0 * float(np.sum(1.0 / s)))
        else:
            self._size_q = np.full(n - 1, 1.0 / (n - 1))
            self._scale = n * (n - 1) / (s * (n - s))

    def _reset(self) -> None:
        super()._reset()
        self._ref, self._u_empty, self._u_full = None, None, None
        self._sum_t, self._sum_t2 = np.zeros(self._n), np.zeros(self._n)
        self._m = 0

    def _draw(self, k: int) -> np.ndarray:
        return draw_coalitions(self._rng, k, self._n, self._size_q, np.arange(1, self._n))

    def _update(self, masks: np.ndarray, values: np.ndarray) -> None:
        masks, centred = self._take_extremes(masks, values)
        if masks.shape[0] == 0:
            return
        u_empty, u_full = self._extremes()  # queried in the first batch
        n = self._n
        c = (u_full - u_empty) / n if self.control == "diff" else 0.0
        raw = centred + (self._ref or 0.0)  # the official code uses the raw utility
        s = masks.sum(axis=1)
        weight = (raw - c * s) * self._scale[s - 1]
        t = (masks - s[:, None] / n) * weight[:, None]
        self._sum_t += t.sum(axis=0)
        self._sum_t2 += (t * t).sum(axis=0)
        self._m += masks.shape[0]

    def _estimate(self) -> np.ndarray:
        u_empty, u_full = self._extremes()
        if self._m == 0:
            raise NotFittedError("no sampled coalition seen yet")
        return self._sum_t / self._m + (u_full - u_empty) / self._n

    def _std_error(self) -> np.ndarray | None:
        return None if self._m < 2 else _mean_stderr(self._sum_t, self._sum_t2, self._m)


class ARM(SemiValueApproximator):
    """ARM (approximation without requesting marginals; Kolpaczki et al. 2024, any semi-value).

    Each unit queries two coalitions: ``S_L`` with ``P(|S_L| = s) ∝ w_{s-1}/s`` (``s = 1..n``) and
    ``S_R`` with ``P(|S_R| = s) ∝ w_s/(n-s)`` (``s = 0..n-1``); then
    ``phi_i = mean(U(S_L) | i ∈ S_L) - mean(U(S_R) | i ∉ S_R)`` (the official ``ARM``). A player
    not yet seen on a side takes that side's overall mean. O(n) state.
    """

    name = "arm"
    n_extreme_queries = 0
    _unit = 2

    @property
    def min_budget(self) -> int:
        return 4

    def _validate(self) -> None:
        super()._validate()
        n = self._n
        w = self._sv.weights(n)
        k = np.arange(1, n + 1, dtype=float)
        left, right = w / k, w / k[::-1]
        self._q_left, self._q_right = left / left.sum(), right / right.sum()

    def _reset(self) -> None:
        super()._reset()
        n = self._n
        self._ref: float | None = None
        # [side, player]: side 0 = U(S_L) with i ∈ S_L, side 1 = U(S_R) with i ∉ S_R
        self._sum, self._sq, self._cnt = np.zeros((2, n)), np.zeros((2, n)), np.zeros((2, n))
        self._side_sum, self._m = np.zeros(2), 0

    def _draw(self, k: int) -> np.ndarray:
        n, pairs = self._n, k // 2
        left = draw_coalitions(self._rng, pairs, n, self._q_left, np.arange(1, n + 1))
        right = draw_coalitions(self._rng, pairs, n, self._q_right, np.arange(0, n))
        both = np.empty((2 * pairs, n), dtype=bool)
        both[0::2], both[1::2] = left, right
        return both

    def _update(self, masks: np.ndarray, values: np.ndarray) -> None:
        if self._ref is None:
            self._ref = float(values[0])
        u = (values - self._ref).reshape(-1, 2)
        sides = (masks[0::2], ~masks[1::2])
        for j, member in enumerate(sides):
            self._sum[j] += u[:, j] @ member
            self._sq[j] += (u[:, j] ** 2) @ member
            self._cnt[j] += member.sum(axis=0)
            self._side_sum[j] += float(u[:, j].sum())
        self._m += u.shape[0]

    def _estimate(self) -> np.ndarray:
        if self._m == 0:
            raise NotFittedError("no sampled pair seen yet")
        fallback = self._side_sum / self._m
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(self._cnt > 0, self._sum / self._cnt, fallback[:, None])
        return means[0] - means[1]

    def _std_error(self) -> np.ndarray | None:
        if self._m < 2:
            return None
        se = _mean_stderr(self._sum, self._sq, self._cnt)  # two independent samples per unit
        return np.sqrt(se[0] ** 2 + se[1] ** 2)


class GELS(SemiValueApproximator):
    """GELS (Li & Yu, Algorithm 2 of "Faster approximation of probabilistic and distributional
    values via least squares"; any semi-value).

    A dummy player ``n`` joins the game; sizes ``s = 1..n`` of the ``n + 1`` players are drawn with
    ``q_s ∝ w_{s-1} / (s (n+1-s))``, the coalition without the dummy is queried, and
    ``phi_i = C (mean(U | i ∈ S) - mean(U | n ∈ S))`` with ``C = sum_k n w_k / (n - k)``. The
    standard error ignores the covariance of the two means (it is positive, so the interval is
    conservative). O(n) state.
    """

    name = "gels"
    n_extreme_queries = 0

    @property
    def min_budget(self) -> int:
        return 2

    def _validate(self) -> None:
        super()._validate()
        n = self._n
        w = self._sv.weights(n)
        self._scalar = float(np.sum(n * w / np.arange(n, 0, -1)))
        s = np.arange(1, n + 1, dtype=float)
        q = w / (s * (n + 1 - s))
        self._size_q = q / q.sum()

    def _reset(self) -> None:
        super()._reset()
        n = self._n
        self._ref: float | None = None
        self._sum, self._sq, self._cnt = np.zeros(n + 1), np.zeros(n + 1), np.zeros(n + 1)
        self._sum_all, self._m = 0.0, 0
        self._pending_dummy = np.zeros(0, dtype=bool)

    def _draw(self, k: int) -> np.ndarray:
        n = self._n
        extended = draw_coalitions(self._rng, k, n + 1, self._size_q, np.arange(1, n + 1))
        self._pending_dummy = extended[:, n]
        return extended[:, :n]

    def _update(self, masks: np.ndarray, values: np.ndarray) -> None:
        if self._ref is None:
            self._ref = float(values[0])
        u = values - self._ref
        member = np.column_stack([masks, self._pending_dummy[: masks.shape[0]]])
        self._sum += u @ member
        self._sq += (u * u) @ member
        self._cnt += member.sum(axis=0)
        self._sum_all += float(u.sum())
        self._m += masks.shape[0]

    def _estimate(self) -> np.ndarray:
        if self._m == 0:
            raise NotFittedError("no sampled coalition seen yet")
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(self._cnt > 0, self._sum / self._cnt, self._sum_all / self._m)
        return self._scalar * (means[:-1] - means[-1])

    def _std_error(self) -> np.ndarray | None:
        if self._m < 2:
            return None
        se = _mean_stderr(self._sum, self._sq, self._cnt)
        return self._scalar * np.sqrt(se[:-1] ** 2 + se[-1] ** 2)


class GELSShapley(_ExtremesMixin, SemiValueApproximator):
    """GELS for the Shapley value (Li & Yu, Algorithm 3): sizes ``q_s ∝ 1/(s(n-s))``,
    ``phi_i = H_{n-1} mean(U | i ∈ S) + (U([n]) - U(∅) - sum_j H_{n-1} mean(U | j ∈ S)) / n``.

    The standard error is that of the first term (the efficiency offset is shared by all players).
    """

    name = "gels-shapley"

    def _validate(self) -> None:
        super()._validate()
        _require(self._sv, "shapley", "GELS-Shapley")
        self._size_q = kernel_size_distribution(self._n)
        self._harmonic = float(np.sum(1.0 / np.arange(1, self._n)))

    def _reset(self) -> None:
        super()._reset()
        n = self._n
        self._ref, self._u_empty, self._u_full = None, None, None
        self._sum, self._sq, self._cnt = np.zeros(n), np.zeros(n), np.zeros(n)
        self._sum_all, self._m = 0.0, 0

    def _draw(self, k: int) -> np.ndarray:
        return draw_coalitions(self._rng, k, self._n, self._size_q, np.arange(1, self._n))

    def _update(self, masks: np.ndarray, values: np.ndarray) -> None:
        masks, u = self._take_extremes(masks, values)
        self._sum += u @ masks
        self._sq += (u * u) @ masks
        self._cnt += masks.sum(axis=0)
        self._sum_all += float(u.sum())
        self._m += masks.shape[0]

    def _estimate(self) -> np.ndarray:
        u_empty, u_full = self._extremes()
        if self._m == 0:
            raise NotFittedError("no sampled coalition seen yet")
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(self._cnt > 0, self._sum / self._cnt, self._sum_all / self._m)
        first = self._harmonic * means
        return first + (u_full - u_empty - first.sum()) / self._n

    def _std_error(self) -> np.ndarray | None:
        if self._m < 2:
            return None
        return self._harmonic * _mean_stderr(self._sum, self._sq, self._cnt)
