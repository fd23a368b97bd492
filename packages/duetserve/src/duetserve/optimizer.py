"""DuetServe's per-iteration partition optimizer.

Given the decode-first mixed batch an iteration would run, keep it aggregated (one stream, all SMs)
when the roofline says it meets the TBT SLO. Otherwise split it: enumerate decode partitions ``n_d`` in
steps of the SM granularity (a TPC, or what the masking backend grants), drop those whose predicted
decode step exceeds the SLO, give the rest of the SMs to the prefill chunks, and pick the look-ahead
``k`` (decode steps overlapping one prefill pass) and ``n_d`` that maximise throughput over the overlap
window::

    window(n_d, k) = max(k t_d(n_d), t_p(N - n_d))
    score(n_d, k)  = (k |D| + sum q_prefill) / window     # tokens per second (inferred objective)
    subject to       t_d(n_d) <= T_TBT,  k <= max_lookahead,
                     k t_d(n_d) >= t_p(N - n_d)            # the decodes never stall on the prefill

For a fixed ``n_d`` the score falls in ``k`` once ``k t_d >= t_p``, so the best ``k`` is
``ceil(t_p / t_d)`` (the spec's form): one candidate per ``n_d``, all vectorised. Letting the decode
partition idle while the prefill finishes (``k < t_p / t_d``) would raise the score but put the idle
time into the next token's gap, which the SLO is about. If no candidate is feasible the fallback keeps
the batch aggregated with the prefill chunk cut to the largest size that meets the SLO (at least
``min_prefill_tokens``, so prefills progress).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np

from duetserve.roofline import FEATURES, BatchStats, RooflineModel, Seq, feature_rows, features

Mode = Literal["aggregated", "spatial"]
# Why a plan is what it is: nothing to overlap, the mixed batch meets the SLO, the optimizer's split,
# the fallback, or a fixed split chosen outside the optimizer (the simulator's static baseline).
Reason = Literal["no_overlap", "fits", "spatial", "fallback", "static"]
# score(k, n_decodes, prefill_tokens, t_decode, t_prefill) -> score, all arrays broadcast together.
Objective = Callable[[np.ndarray, int, int, np.ndarray, np.ndarray], np.ndarray]


def overlap_throughput(
    k: np.ndarray, n_decodes: int, prefill_tokens: int, t_decode: np.ndarray, t_prefill: np.ndarray
) -> np.ndarray:
    """Tokens per second over the overlap window (the default objective; its form is inferred)."""
    return (k * n_decodes + prefill_tokens) / np.maximum(k * t_decode, t_prefill)


@dataclasses.dataclass(frozen=True)
class PartitionPlan:
    """What one iteration runs. Aggregated: one stream on all SMs (``n_sm_decode == n_sm_prefill ==
    n_sm``), ``lookahead == 1``; ``prefill_token_cap`` (fallback only) cuts the prefill chunks. Spatial:
    ``lookahead`` decode steps on ``n_sm_decode`` SMs overlap one prefill pass on ``n_sm_prefill``.
    ``predicted`` holds the roofline's seconds (``t_mix``, ``t_decode``, ``t_prefill``, ``window``) and
    the objective's ``score``."""

    mode: Mode
    n_sm_decode: int
    n_sm_prefill: int
    lookahead: int
    reason: Reason
    predicted: dict[str, float]
    prefill_token_cap: int | None = None

    def as_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


class PartitionOptimizer:
    """Choose aggregated or spatial execution, the SM split and the look-ahead for one iteration.

    ``granularity_sm`` (default: the profile's, one TPC) is the enumeration step; it must be a multiple
    of the TPC size and at least the backend's minimum partition. ``max_lookahead`` caps ``k`` (each
    decode then needs up to ``k`` KV slots ahead); ``lookahead`` fixes ``k`` instead of optimising it.
    ``objective`` replaces the inferred throughput objective (see :func:`overlap_throughput`).
    """

    def __init__(
        self,
        model: RooflineModel,
        tbt_slo_s: float,
        granularity_sm: int | None = None,
        *,
        max_lookahead: int = 8,
        lookahead: int | None = None,
        min_prefill_tokens: int = 16,
        objective: Objective = overlap_throughput,
    ) -> None:
        hw = model.hw
        if not (
            isinstance(tbt_slo_s, (int, float, np.floating, np.integer))
            and not isinstance(tbt_slo_s, bool)
            and math.isfinite(tbt_slo_s)
            and tbt_slo_s > 0
        ):
            raise ValueError(f"tbt_slo_s must be a finite number of seconds > 0, got {tbt_slo_s!r}")
        g = hw.granularity_sm if granularity_sm is None else granularity_sm
        if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or g <= 0:
            raise ValueError(f"granularity_sm must be a positive integer, got {granularity_sm!r}")
        if g % hw.sms_per_tpc:
            raise ValueError(
                f"granularity_sm={g} is not a multiple of the TPC size ({hw.sms_per_tpc} SMs on "
                f"{hw.name}); the granted granularity is {hw.granularity_sm} SMs"
            )
        if hw.min_partition_sm is not None and g < hw.min_partition_sm:
            raise ValueError(
                f"granularity_sm={g} is below {hw.name}'s minimum partition of "
                f"{hw.min_partition_sm} SMs; the granted granularity is {hw.granularity_sm} SMs"
            )
        if 2 * g > hw.n_sm:
            raise ValueError(
                f"granularity_sm={g} leaves no room for two partitions of {hw.n_sm} SMs"
            )
        if _not_int(max_lookahead) or max_lookahead < 1:
            raise ValueError(f"max_lookahead must be an integer >= 1, got {max_lookahead!r}")
        if lookahead is not None and (_not_int(lookahead) or not 1 <= lookahead <= max_lookahead):
            raise ValueError(
                f"lookahead must lie in [1, max_lookahead={max_lookahead}], got {lookahead}"
            )
        if _not_int(min_prefill_tokens) or min_prefill_tokens < 0:
            raise ValueError(
                f"min_prefill_tokens must be an integer >= 0, got {min_prefill_tokens!r}"
            )
        self.model = model
        self.tbt_slo_s = float(tbt_slo_s)
        self.granularity_sm = int(g)
        self.max_lookahead = int(max_lookahead)
        self.lookahead = lookahead
        self.min_prefill_tokens = int(min_prefill_tokens)
        self.objective = objective
        # Decode partitions: every multiple of the granularity leaving at least one step for prefill.
        self.candidates = np.arange(g, hw.n_sm - g + 1, g, dtype=np.int64)
        c = self.candidates.size
        inv_f, inv_b = model.inverse_curves(
            np.concatenate([self.candidates, hw.n_sm - self.candidates, [hw.n_sm]])
        )
        # The reciprocal curves as a (1, 3, c) table per roof: row 0 the decode partitions n_d, row
        # 1 the prefill remainders N - n_d, row 2 all N SMs (the mixed batch, repeated) so that one
        # broadcast prices the three parts of an iteration on every candidate at once.
        self._inv_f = np.stack([inv_f[:c], inv_f[c : 2 * c], np.full(c, inv_f[-1])])[None]
        self._inv_b = np.stack([inv_b[:c], inv_b[c : 2 * c], np.full(c, inv_b[-1])])[None]
        flops_m, bytes_m = model.cost_matrices()
        # FLOPs rows then bytes rows: one product prices every part of a batch.
        self._costs = np.vstack([flops_m, bytes_m])
        self._n_ops = flops_m.shape[0]
        # The fixed seconds (TP all-reduces per token, launch overhead once) as one more linear row,
        # and the cost table of one chunk's basis (see prefill_cap).
        fixed = np.zeros((1, flops_m.shape[1]))
        fixed[0, FEATURES.index("tokens")] = model.fixed_seconds_per_token
        fixed[0, FEATURES.index("has_tokens")] = hw.launch_overhead_s
        # Priced on all N SMs: FLOPs rows times 1 / Pi(N), bytes rows times 1 / B(N), so a row of
        # features maps to [compute seconds per op, memory seconds per op, fixed seconds].
        scale = np.concatenate(
            [np.full(self._n_ops, inv_f[-1]), np.full(self._n_ops, inv_b[-1]), [1.0]]
        )
        self._costs_all_sm = np.vstack([self._costs, fixed]) * scale[:, None]
        self._cap_costs = np.vstack([_CAP_M0, _CAP_M1]) @ self._costs_all_sm.T

    def __repr__(self) -> str:
        return (
            f"PartitionOptimizer({self.model!r}, tbt_slo_s={self.tbt_slo_s}, "
            f"granularity_sm={self.granularity_sm}, max_lookahead={self.max_lookahead})"
        )

    def plan(
        self,
        decodes: Sequence[Seq] | BatchStats,
        prefills: Sequence[Seq],
        *,
        max_lookahead: int | None = None,
    ) -> PartitionPlan:
        """The plan for an iteration whose decode-first mixed batch is ``decodes + prefills``
        (``decodes`` may be given as their :class:`BatchStats`). ``max_lookahead`` lowers the
        optimizer's cap on ``k`` for this call (the scheduler's re-plan when the KV cache cannot
        hold the look-ahead slots): the split is re-chosen under it, so ``k t_d >= t_p`` still
        holds, or the fallback's chunk cap is used."""
        k_cap = (
            self.max_lookahead if max_lookahead is None else min(max_lookahead, self.max_lookahead)
        )
        if _not_int(k_cap) or k_cap < 1:
            raise ValueError(f"max_lookahead must be an integer >= 1, got {max_lookahead!r}")
        d_stats = decodes if isinstance(decodes, BatchStats) else BatchStats.of(decodes)
        p_stats = BatchStats.of(prefills)  # a one-token chunk is priced like a decode: it is one
        if d_stats.prefill_seqs:
            raise ValueError(
                f"decodes must all have new_tokens == 1; {d_stats.prefill_seqs} have more"
            )
        n_sm = self.model.hw.n_sm
        t_mix, t_d, t_p = self._table(d_stats, p_stats)
        predicted = {"t_mix": t_mix}
        if not d_stats.decode_seqs or not prefills:
            return PartitionPlan("aggregated", n_sm, n_sm, 1, "no_overlap", predicted)
        if t_mix <= self.tbt_slo_s:
            return PartitionPlan("aggregated", n_sm, n_sm, 1, "fits", predicted)
        best = self._best_split(d_stats, p_stats, t_d, t_p, int(k_cap))
        if best is not None:
            n_d, k, td, tp, score = best
            predicted.update(t_decode=td, t_prefill=tp, window=max(k * td, tp), score=score)
            return PartitionPlan("spatial", n_d, n_sm - n_d, k, "spatial", predicted)
        cap, t_capped = self.prefill_cap(d_stats, prefills)
        predicted.update(t_capped=t_capped)
        return PartitionPlan("aggregated", n_sm, n_sm, 1, "fallback", predicted, cap)

    # ---- the steps ----------------------------------------------------------------------------
    def _table(
        self, d_stats: BatchStats, p_stats: BatchStats
    ) -> tuple[float, np.ndarray, np.ndarray]:
        """t_mix on all SMs, t_d on every candidate ``n_d``, t_p on every remainder ``N - n_d``.

        The hot path of every iteration, a fixed handful of NumPy calls whatever the batch: one
        matrix product gives the FLOPs and bytes of the decode part, the prefill part and the mixed
        batch, then one broadcast takes the roofline max per operator, part and SM count
        (see :meth:`RooflineModel.latency_rows`) and one sum adds the operators up."""
        mix = d_stats + p_stats
        costs = self._costs @ feature_rows(d_stats, p_stats, mix).T  # (2 ops, 3 parts)
        n = self._n_ops
        per_op = np.maximum(costs[:n, :, None] * self._inv_f, costs[n:, :, None] * self._inv_b)
        t = per_op.sum(axis=0)  # (3 parts, candidates)
        fixed = self.model.fixed_seconds
        t_d = t[0] + fixed(d_stats)
        t_p = t[1] + fixed(p_stats)
        return float(t[2, 0]) + fixed(mix), t_d, t_p

    def _best_split(
        self,
        d_stats: BatchStats,
        p_stats: BatchStats,
        t_d: np.ndarray,
        t_p: np.ndarray,
        max_lookahead: int,
    ) -> tuple[int, int, float, float, float] | None:
        if self.lookahead is not None and self.lookahead <= max_lookahead:
            ks = np.full(t_d.size, float(self.lookahead))
        else:
            ks = np.ceil(t_p / t_d)  # >= 1: a prefill pass takes time
        score = self.objective(ks, d_stats.decode_seqs, p_stats.prefill_tokens, t_d, t_p)
        bad = (t_d > self.tbt_slo_s) | (ks > max_lookahead) | (ks * t_d < t_p)
        col = int(np.where(bad, -np.inf, score).argmax())
        if bad[col]:  # every candidate is infeasible
            return None
        return (
            int(self.candidates[col]),
            int(ks[col]),
            float(t_d[col]),
            float(t_p[col]),
            float(score[col]),
        )

    def prefill_cap(self, d_stats: BatchStats, prefills: Sequence[Seq]) -> tuple[int, float]:
        """The largest total prefill tokens (FCFS-truncated chunks) whose mixed batch with the
        decodes ``d_stats`` meets the SLO (at least ``min_prefill_tokens``), and its prediction.

        A cap ``x`` takes the chunks before its segment whole and ``t = x - start`` tokens of the
        chunk it lands in, whose features are ``[1, t, t^2, t == 1] @ (M0 + context M1)``; FLOPs,
        bytes and the fixed seconds are linear in the features, so a batch of caps is priced with
        one matrix product on the precomputed cost table. The latency is non-decreasing in the cap:
        a grid of about sqrt(total) caps (and the floor ``min_prefill_tokens``) brackets the answer
        and one more pass prices every integer in the bracket."""
        n = len(prefills)
        if n == 0:
            return 0, self._decodes_alone(d_stats)
        q, ctx = np.array([(p.new_tokens, p.context) for p in prefills], dtype=np.float64).T
        ends = np.cumsum(q)
        start = ends - q
        total = int(ends[-1])
        # Row j: the costs of the decodes plus chunks 0..j-1 whole (has_tokens is 1 from here on).
        whole = np.empty((n, 8))
        _cap_basis(q, ctx, whole)
        contrib = whole @ self._cap_costs
        base = features(d_stats)
        base[0] = 1.0
        prefix = np.cumsum(contrib, axis=0) - contrib + base @ self._costs_all_sm.T
        slo = self.tbt_slo_s

        def latency(caps: np.ndarray) -> np.ndarray:  # caps >= 1
            j = np.searchsorted(ends, caps, side="left")
            basis = np.empty((caps.size, 8))
            _cap_basis(caps - start[j], ctx[j], basis)
            return self._cap_seconds(basis @ self._cap_costs + prefix[j])

        step = max(1, math.isqrt(total))  # two passes of about sqrt(total) caps each
        floor = min(self.min_prefill_tokens, total)
        grid = np.arange(step, total + 2 * step, step, dtype=np.float64)
        grid[-2:] = total, max(floor, 1)
        t_grid = latency(grid)
        if floor and t_grid[-1] > slo:  # not even the floor fits: the floor it is
            return floor, float(t_grid[-1])
        ok = np.flatnonzero(t_grid[:-1] <= slo)
        best, t_best = (int(grid[ok[-1]]), float(t_grid[ok[-1]])) if ok.size else (0, math.nan)
        top = min(best + step, total + 1)  # the bracket's end (exclusive)
        low = max(floor, best + 1)  # caps below the floor cannot be the answer
        if top > low:  # the bracket can raise the answer: price each integer in it
            fine = np.arange(low, top, dtype=np.float64)
            t_fine = latency(fine)
            ok_fine = np.flatnonzero(t_fine <= slo)
            if ok_fine.size:
                best, t_best = int(fine[ok_fine[-1]]), float(t_fine[ok_fine[-1]])
        if best and best >= floor:
            return best, t_best
        if floor == 0:  # no prefill token fits and none is required: the decodes alone
            return 0, self._decodes_alone(d_stats)
        return floor, float(t_grid[-1])

    def _decodes_alone(self, d_stats: BatchStats) -> float:
        return float(self._cap_seconds((features(d_stats) @ self._costs_all_sm.T)[None])[0])

    def _cap_seconds(self, costs: np.ndarray) -> np.ndarray:
        """Seconds from rows of ``[compute s per op, memory s per op, fixed s]`` on all SMs."""
        n = self._n_ops
        return np.maximum(costs[:, :n], costs[:, n : 2 * n]).sum(axis=1) + costs[:, -1]


def _cap_basis(t: np.ndarray, ctx: np.ndarray, out: np.ndarray) -> None:
    """``[b, c b]`` with ``b = [1, t, t^2, t == 1]`` per row into ``out`` (shape ``(m, 8)``): the
    features of ``t`` tokens of a chunk on ``c`` cached ones are linear in it (see _cap_matrices)."""
    out[:, 0] = 1.0
    out[:, 1] = t
    np.multiply(t, t, out=out[:, 2])
    np.equal(t, 1.0, out=out[:, 3])
    np.multiply(out[:, :4], ctx[:, None], out=out[:, 4:])


def _cap_matrices() -> tuple[np.ndarray, np.ndarray]:
    """``M0`` and ``M1`` with ``features(t tokens of a chunk on c cached) = basis(t) @ (M0 + c M1)``
    (has_tokens left out). A one-token chunk is priced as a decode, as :meth:`BatchStats.of` does:
    the ``t == 1`` column moves it from the prefill sums to the decode ones."""
    col = {name: i for i, name in enumerate(FEATURES)}
    m0 = np.zeros((4, len(FEATURES)))
    m1 = np.zeros((4, len(FEATURES)))
    m0[1, col["tokens"]] = 1.0
    m0[0, col["seqs"]] = 1.0
    m0[3, col["decode_kv"]] = m1[3, col["decode_kv"]] = 1.0  # (c + 1) [t == 1]
    m0[3, col["decode_seqs"]] = 1.0
    # t (c + (t + 1) / 2) = c t + t / 2 + t^2 / 2, less its t = 1 value c + 1
    m1[1, col["prefill_qc"]] = 1.0
    m0[1, col["prefill_qc"]] = m0[2, col["prefill_qc"]] = 0.5
    m0[3, col["prefill_qc"]] = m1[3, col["prefill_qc"]] = -1.0
    m0[1, col["prefill_tokens"]] = 1.0
    m0[3, col["prefill_tokens"]] = -1.0
    m1[0, col["prefill_kv"]] = m0[1, col["prefill_kv"]] = 1.0  # c + t
    m0[3, col["prefill_kv"]] = m1[3, col["prefill_kv"]] = -1.0
    return m0, m1


_CAP_M0, _CAP_M1 = _cap_matrices()


def _not_int(x: object) -> bool:
    return isinstance(x, bool) or not isinstance(x, (int, np.integer))


def cap_prefills(prefills: Sequence[Seq], cap: int) -> list[Seq]:
    """Cut prefill chunks first-come-first-served to ``cap`` new tokens in total (empty chunks go)."""
    out: list[Seq] = []
    left = cap
    for p in prefills:
        if left <= 0:
            break
        q = min(p.new_tokens, left)
        out.append(Seq(p.context, q))
        left -= q
    return out
