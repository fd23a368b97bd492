"""A discrete-event serving simulator priced by the roofline, for CPU evaluation of the policies.

Policies, all with continuous batching and a paged KV cache sized from the GPU's memory:

* ``aggregated``: Sarathi/vLLM chunked prefill; every iteration runs the decode-first mixed batch on
  all SMs.
* ``duet``: DuetServe; the :class:`~duetserve.optimizer.PartitionOptimizer` keeps an iteration
  aggregated when it meets the TBT SLO, else runs a spatial window: ``k`` decode steps on ``n_d`` SMs
  overlapping one prefill pass on the rest (stop checks deferred to the window's end: tokens past a
  stop are computed and counted as wasted).
* ``static_spatial``: the same two streams with a fixed split (``static_decode_fraction`` of the SMs
  to decode), whatever the mix.
* ``disaggregated``: one prefill GPU and one decode GPU (1P+1D, DistServe/Dynamo style); KV moves
  over the interconnect. It uses two GPUs: compare its per-GPU rates (:attr:`SimResult.n_gpus`).

Each iteration's duration is the roofline's prediction; time between tokens is measured per request
and token, TTFT from arrival to the end of the last prefill chunk.
"""

from __future__ import annotations

import collections
import dataclasses
import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

from duetserve.optimizer import PartitionOptimizer, PartitionPlan
from duetserve.roofline import FEATURES, BatchStats, RooflineModel, features
from duetserve.scheduler import Batch, DuetScheduler, RequestState
from duetserve.workloads import Request, validate_trace

Policy = Literal["aggregated", "disaggregated", "static_spatial", "duet"]
POLICIES: tuple[str, ...] = ("aggregated", "disaggregated", "static_spatial", "duet")
KV_MEMORY_FRACTION = 0.9  # vLLM's default gpu_memory_utilization


@dataclasses.dataclass
class SimResult:
    """What a simulation measured: ``tbt`` holds the gaps between consecutive tokens of a request
    (seconds), each ``tbt_weight`` times (the decodes of a batch share a step's latency); ``ttft``
    and ``finish`` are NaN for unfinished requests."""

    policy: str
    requests: list[Request]
    ttft: np.ndarray
    finish: np.ndarray
    tbt: np.ndarray
    tbt_weight: np.ndarray
    makespan: float
    iterations: int
    spatial_iterations: int
    generated_tokens: int
    wasted_tokens: int
    n_gpus: int = 1
    plans: list[PartitionPlan] = dataclasses.field(default_factory=list, repr=False)

    @property
    def finished(self) -> int:
        return int(np.isfinite(self.finish).sum())

    @property
    def unfinished(self) -> int:
        return len(self.requests) - self.finished

    @property
    def spatial_fraction(self) -> float:
        return self.spatial_iterations / self.iterations if self.iterations else 0.0

    @property
    def throughput_tokens(self) -> float:
        """Useful output tokens per second per GPU over the makespan (NaN when no time passed:
        an empty run measured nothing)."""
        return _per_second(self.generated_tokens, self.makespan, self.n_gpus)

    @property
    def request_throughput(self) -> float:
        """Finished requests per second per GPU over the makespan."""
        return _per_second(self.finished, self.makespan, self.n_gpus)

    def tbt_quantile(self, q: float) -> float:
        return weighted_quantile(self.tbt, self.tbt_weight, q)

    def ttft_quantile(self, q: float) -> float:
        done = self.ttft[np.isfinite(self.ttft)]
        return float(np.quantile(done, q)) if done.size else math.nan

    def meets(self, tbt_slo_s: float, ttft_slo_s: float, q: float = 0.99) -> bool:
        """All requests finished, the ``q`` quantile of TBT within ``tbt_slo_s`` and of TTFT within
        ``ttft_slo_s``."""
        if self.unfinished:
            return False
        tbt = self.tbt_quantile(q)
        return (math.isnan(tbt) or tbt <= tbt_slo_s) and self.ttft_quantile(q) <= ttft_slo_s

    def summary(self) -> dict[str, float]:
        return {
            "p50_tbt_ms": 1e3 * self.tbt_quantile(0.5),
            "p99_tbt_ms": 1e3 * self.tbt_quantile(0.99),
            "p99_ttft_s": self.ttft_quantile(0.99),
            "tokens_per_s_per_gpu": self.throughput_tokens,
            "spatial_fraction": self.spatial_fraction,
            "wasted_fraction": self.wasted_tokens / max(self.generated_tokens, 1),
            "unfinished": self.unfinished,
        }


def _per_second(count: int, seconds: float, n_gpus: int) -> float:
    if seconds > 0:
        return count / seconds / n_gpus
    return math.inf if count > 0 else math.nan  # inf: work done in no time (an infinitely fast GPU)


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The smallest value whose cumulative weight reaches ``q`` of the total (NaN when empty): the
    inverted-CDF quantile of the samples repeated by their weights."""
    if values.size == 0:
        return math.nan
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    idx = int(np.searchsorted(cum, q * cum[-1], side="left"))
    return float(values[order][min(idx, values.size - 1)])


def kv_capacity_tokens(model: RooflineModel, memory_fraction: float = KV_MEMORY_FRACTION) -> int:
    """KV-cache tokens one GPU holds after the weights, at ``memory_fraction`` of its memory."""
    free = model.hw.memory_bytes * memory_fraction - model.shape.weight_bytes_per_rank
    if free <= 0:
        raise ValueError(
            f"{model.shape.name} weights ({model.shape.weight_bytes_per_rank / 1e9:.1f} GB per rank) "
            f"do not fit {model.hw.name}'s {model.hw.memory_bytes / 1e9:.0f} GB"
        )
    return int(free // model.shape.kv_bytes_per_token)


@dataclasses.dataclass(eq=False)
class _State(RequestState):
    last_token: float = math.nan


class _Recorder:
    """Collects TBT samples, TTFTs, finish times and token counts while the engine runs."""

    def __init__(self, n: int, keep_plans: bool) -> None:
        self.gaps: list[float] = []
        self.bulk: list[tuple[np.ndarray, int]] = []  # step latencies, each shared by n decodes
        self.ttft = np.full(n, math.nan)
        self.finish = np.full(n, math.nan)
        self.iterations = self.spatial = self.generated = self.wasted = 0
        self.keep_plans = keep_plans
        self.plans: list[PartitionPlan] = []

    def first_token(self, r: _State, at: float) -> None:
        r.generated = 1
        r.last_token = at
        self.generated += 1
        self.ttft[r.request.id] = at - r.request.arrival
        if r.finished:
            self.finish[r.request.id] = at

    def decode_tokens(
        self, r: _State, first_at: float, later: Sequence[float], wasted: int
    ) -> None:
        """One token at ``first_at``, then one after each step latency in ``later``."""
        self.gaps.append(first_at - r.last_token)
        self.gaps.extend(later)
        r.generated += 1 + len(later)
        r.last_token = first_at + sum(later)
        self.generated += 1 + len(later)
        self.wasted += wasted
        if r.finished:
            self.finish[r.request.id] = r.last_token

    def result(self, policy: str, trace: list[Request], t_end: float, n_gpus: int) -> SimResult:
        start = trace[0].arrival if trace else 0.0
        tbt = np.concatenate([np.asarray(self.gaps)] + [lat for lat, _ in self.bulk])
        weight = np.concatenate(
            [np.ones(len(self.gaps))] + [np.full(lat.size, float(n)) for lat, n in self.bulk]
        )
        return SimResult(
            policy,
            trace,
            self.ttft,
            self.finish,
            tbt,
            weight,
            t_end - start,
            self.iterations,
            self.spatial,
            self.generated,
            self.wasted,
            n_gpus,
            self.plans,
        )


class _Engine:
    """One GPU running continuous batching under a planning policy."""

    def __init__(
        self,
        policy: Policy,
        model: RooflineModel,
        scheduler: DuetScheduler,
        rec: _Recorder,
        static_decode_sm: int,
        shared_bandwidth: bool = False,
    ) -> None:
        self.policy = policy
        self.shared_bandwidth = shared_bandwidth
        self.model = model
        self.scheduler = scheduler
        self.rec = rec
        self.static_decode_sm = static_decode_sm
        self.n_sm = model.hw.n_sm

    def plan(
        self, waiting: Sequence[_State], running: Sequence[_State]
    ) -> tuple[Batch, PartitionPlan]:
        if self.policy == "duet":
            return self.scheduler.step(waiting, running)
        kv_free = self._kv_free(running)
        batch = self.scheduler.build_batch(waiting, running, kv_free)
        if self.policy == "aggregated":
            return batch, PartitionPlan("aggregated", self.n_sm, self.n_sm, 1, "fits", {})
        n_d = self.static_decode_sm
        k = 1
        if batch.decodes and batch.prefills:
            # A static split runs its decode stream freely beside the prefill: as many steps as fit.
            t_d = self.model.iteration_latency(batch.decode_seqs(), n_d)
            t_p = self.model.iteration_latency(batch.prefill_seqs(), self.n_sm - n_d)
            k = max(math.ceil(t_p / t_d), 1)
        return batch, PartitionPlan("spatial", n_d, self.n_sm - n_d, k, "static", {})

    def _kv_free(self, running: Sequence[_State]) -> float:
        cap = self.scheduler.kv_capacity_tokens
        return math.inf if cap is None else cap - sum(r.kv_reserved for r in running)

    def run(self, trace: list[Request], max_time: float) -> float:
        """Serve ``trace``; returns the time the last iteration ended."""
        waiting: collections.deque[_State] = collections.deque()
        running: list[_State] = []
        t, i = (trace[0].arrival if trace else 0.0), 0
        while i < len(trace) or waiting or running:
            while i < len(trace) and trace[i].arrival <= t:
                waiting.append(_State(trace[i]))
                i += 1
            if not waiting and not running:
                t = trace[i].arrival
                continue
            if t > max_time:
                break
            batch, plan = self.plan(waiting, running)
            if batch.num_tokens == 0:
                if not running:  # the head of the queue can never fit: report it unfinished
                    waiting.popleft()
                    continue
                raise AssertionError("running requests but an empty batch")
            for _ in batch.admitted:
                running.append(waiting.popleft())
            if not batch.prefills:  # decode-only: run to the next arrival or finish at once
                n_sm = plan.n_sm_decode
                next_arrival = trace[i].arrival if i < len(trace) else math.inf
                before = self.rec.iterations
                t = decode_steps(self.model, n_sm, batch.decodes, t, next_arrival, self.rec)  # type: ignore[arg-type]
                if plan.mode == "spatial":
                    self.rec.spatial += self.rec.iterations - before
            else:
                t = self.execute(batch, plan, t)
            running = [r for r in running if not r.finished]
        return t

    def execute(self, batch: Batch, plan: PartitionPlan, start: float) -> float:
        rec = self.rec
        rec.iterations += 1
        if rec.keep_plans:
            rec.plans.append(plan)
        if plan.mode == "aggregated":
            end = start + self.model.iteration_latency(
                BatchStats.of(batch.decode_seqs() + batch.prefill_seqs())
            )
            for r in batch.decodes:
                rec.decode_tokens(r, end, (), 0)  # type: ignore[arg-type]
            self._prefill_done(batch, end)
            return end
        rec.spatial += 1
        k = plan.lookahead
        steps: list[float] = []
        if batch.decodes:
            kv0 = float(sum(r.context + 1 for r in batch.decodes))
            lat = decode_latencies(self.model, plan.n_sm_decode, len(batch.decodes), kv0, k)
            steps = lat.tolist()
        t_p = 0.0
        if batch.prefills:
            t_p = self._prefill_seconds(batch, plan)
        # DuetServe's window defers stop checks to its end (tokens past a stop are wasted); a static
        # split's free-running decode stream checks every step.
        deferred = plan.reason != "static"
        for r in batch.decodes:
            useful = min(k, r.request.output_len - r.generated)
            wasted = k - useful if deferred else 0
            rec.decode_tokens(r, start + steps[0], steps[1:useful], wasted)  # type: ignore[arg-type]
        self._prefill_done(batch, start + t_p)
        return start + max(sum(steps), t_p)

    def _prefill_seconds(self, batch: Batch, plan: PartitionPlan) -> float:
        """The prefill pass on its partition. With ``shared_bandwidth`` its HBM bandwidth is capped at
        what the decode partition leaves, ``B(N) - B(n_d)`` (at least one granule's ``B(g)``: the
        decode stream is taken to draw its full B(n_d) for the whole window, a pessimistic bound)."""
        n_p = plan.n_sm_prefill
        if not (self.shared_bandwidth and batch.decodes):
            return self.model.iteration_latency(batch.prefill_seqs(), n_p)
        hw = self.model.hw
        left = float(hw.bw_curve(hw.n_sm)) - float(hw.bw_curve(plan.n_sm_decode))
        bw = min(float(hw.bw_curve(n_p)), max(left, float(hw.bw_curve(hw.granularity_sm))))
        rows = features(BatchStats.of(batch.prefill_seqs()))[None]
        inv_f = 1.0 / np.atleast_1d(hw.flops_curve(n_p))
        return float(self.model.latency_rows(rows, inv_f, np.array([1.0 / bw]))[0, 0])

    def _prefill_done(self, batch: Batch, at: float) -> None:
        for r, q in batch.prefills:
            r.prefilled += q
            if not r.in_prefill:
                self.rec.first_token(r, at)  # type: ignore[arg-type]


def simulate(
    trace: Sequence[Request],
    policy: Policy,
    model: RooflineModel,
    *,
    tbt_slo_s: float = 0.1,
    token_budget: int = 8192,
    max_num_seqs: int = 256,
    max_lookahead: int = 8,
    static_decode_fraction: float = 0.5,
    kv_capacity: int | None = None,
    kv_transfer_bw: float | None = None,
    max_time: float = math.inf,
    keep_plans: bool = False,
    optimizer: PartitionOptimizer | None = None,
    shared_bandwidth: bool = False,
) -> SimResult:
    """Serve ``trace`` with ``policy`` on ``model``'s GPU and measure TBT, TTFT and throughput.

    ``tbt_slo_s`` is the bound the ``duet`` optimizer plans for (others ignore it); ``kv_capacity``
    (tokens, default from the GPU's memory) bounds admission; ``max_time`` stops the run (requests
    not done by then are reported unfinished). ``optimizer`` overrides the one built from
    ``tbt_slo_s`` and ``max_lookahead`` (to sweep its reconstructed knobs). ``shared_bandwidth``
    caps a spatial window's prefill bandwidth at ``B(N) - B(n_d)`` (the two partitions share one
    HBM; by default each gets its own curve, B(n_d) + B(N - n_d) may exceed B(N)).
    """
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    if not 0 < static_decode_fraction < 1:
        raise ValueError(f"static_decode_fraction must lie in (0, 1), got {static_decode_fraction}")
    trace = list(trace)
    validate_trace(trace)
    ids = [r.id for r in trace]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})[:5]
        raise ValueError(f"request ids must be unique; repeated: {dup}")
    if sorted(ids) != list(range(len(trace))):
        trace = [dataclasses.replace(r, id=i) for i, r in enumerate(trace)]
    opt = optimizer or PartitionOptimizer(model, tbt_slo_s, max_lookahead=max_lookahead)
    cap = kv_capacity_tokens(model) if kv_capacity is None else kv_capacity
    sched = DuetScheduler(opt, token_budget, max_num_seqs=max_num_seqs, kv_capacity_tokens=cap)
    rec = _Recorder(len(trace), keep_plans)
    if policy == "disaggregated":
        bw = model.hw.link_bw if kv_transfer_bw is None else kv_transfer_bw
        t_end = _disaggregated(trace, model, sched, rec, bw, max_time)
        return rec.result(policy, trace, t_end, n_gpus=2)
    g = model.hw.granularity_sm
    n_d = int(np.clip(round(static_decode_fraction * model.hw.n_sm / g) * g, g, model.hw.n_sm - g))
    t_end = _Engine(policy, model, sched, rec, n_d, shared_bandwidth).run(trace, max_time)
    return rec.result(policy, trace, t_end, n_gpus=1)


MAX_BULK_STEPS = 4096


def decode_latencies(model: RooflineModel, n_sm: int, n: int, kv0: float, steps: int) -> np.ndarray:
    """Seconds of ``steps`` consecutive decode-only iterations of ``n`` decodes on ``n_sm`` SMs whose
    KV lengths sum to ``kv0`` at the first: each step reads one more KV row per decode."""
    rows = np.zeros((steps, len(FEATURES)))
    rows[:, 0] = 1.0
    rows[:, 1] = rows[:, 3] = rows[:, 7] = n  # tokens, decodes, sequences
    rows[:, 2] = kv0 + n * np.arange(steps)
    inv_flops, inv_bw = model.inverse_curves(n_sm)
    return model.latency_rows(rows, inv_flops, inv_bw)[:, 0]


def decode_steps(
    model: RooflineModel,
    n_sm: int,
    decodes: Sequence[_State],
    start: float,
    stop_at: float,
    rec: _Recorder,
) -> float:
    """Run decode-only iterations from ``start`` until the first one ending at or after ``stop_at``
    (an arrival) or until a decode finishes, all at once: each step's latency is the roofline's with
    the KV one row longer per decode. Returns the time the last step ended."""
    n = len(decodes)
    most = min(min(r.request.output_len - r.generated for r in decodes), MAX_BULK_STEPS)
    kv0 = float(sum(r.context + 1 for r in decodes))
    lat = decode_latencies(model, n_sm, n, kv0, most)
    ends = start + np.cumsum(lat)
    steps = min(int(np.searchsorted(ends, stop_at, side="left")) + 1, most)
    for r in decodes:
        rec.gaps.append(ends[0] - r.last_token)
        r.generated += steps
        r.last_token = float(ends[steps - 1])
        if r.finished:
            rec.finish[r.request.id] = r.last_token
    if steps > 1:
        rec.bulk.append((lat[1:steps].copy(), n))
    rec.generated += steps * n
    rec.iterations += steps
    return float(ends[steps - 1])


def _disaggregated(
    trace: list[Request],
    model: RooflineModel,
    sched: DuetScheduler,
    rec: _Recorder,
    kv_transfer_bw: float,
    max_time: float,
) -> float:
    """Prefill GPU: prefill-only chunked batches, FCFS. Decode GPU: decode-only batches of the
    requests whose KV has arrived. The prefill side does not depend on the decode side (no
    back-pressure), so the two run one after the other."""
    prefill_sched = DuetScheduler(
        sched.optimizer, sched.token_budget, max_num_seqs=sched.max_num_seqs
    )
    prefill_rec = _Recorder(len(trace), keep_plans=False)
    engine = _Engine("aggregated", model, prefill_sched, prefill_rec, 0)
    # The prefill GPU's requests end with their first token.
    t_prefill_end = engine.run([dataclasses.replace(r, output_len=1) for r in trace], max_time)
    rec.ttft = prefill_rec.ttft
    rec.iterations = prefill_rec.iterations
    rec.generated = prefill_rec.generated
    for r in trace:
        if r.output_len == 1:
            rec.finish[r.id] = prefill_rec.finish[r.id]
    ready = []
    for r in trace:
        ttft = rec.ttft[r.id]
        if math.isnan(ttft) or r.output_len == 1:
            continue
        transfer = r.prompt_len * model.shape.kv_bytes_per_token / kv_transfer_bw
        ready.append((r.arrival + ttft + transfer, r))
    ready.sort(key=lambda x: x[0])
    waiting: collections.deque[tuple[float, _State]] = collections.deque()
    running: list[_State] = []
    cap = sched.kv_capacity_tokens or math.inf
    used = 0.0
    t, i = (ready[0][0] if ready else t_prefill_end), 0
    while i < len(ready) or waiting or running:
        while i < len(ready) and ready[i][0] <= t:
            at, req = ready[i]
            s = _State(
                req,
                prefilled=req.prompt_len,
                generated=1,
                last_token=req.arrival + rec.ttft[req.id],
            )
            waiting.append((at, s))
            i += 1
        while (
            waiting
            and len(running) < sched.max_num_seqs
            and used + waiting[0][1].kv_reserved <= cap
        ):
            s = waiting.popleft()[1]
            used += s.kv_reserved
            running.append(s)
        if not running:
            if waiting:  # larger than the decode GPU's whole cache
                waiting.popleft()
                continue
            t = ready[i][0]
            continue
        if t > max_time:
            break
        next_ready = ready[i][0] if i < len(ready) else math.inf
        t = decode_steps(model, model.hw.n_sm, running[: sched.token_budget], t, next_ready, rec)
        done = [r for r in running if r.finished]
        used -= sum(r.kv_reserved for r in done)
        running = [r for r in running if not r.finished]
    return max(t, t_prefill_end)
