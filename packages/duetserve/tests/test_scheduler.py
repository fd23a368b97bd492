import dataclasses

import pytest
from duetserve import (
    DuetScheduler,
    LookaheadReducedWarning,
    PartitionOptimizer,
    Request,
    RequestState,
)


def states(*specs, prefilled=0, generated=0):
    return [
        RequestState(Request(i, 0.0, p, o), prefilled, generated) for i, (p, o) in enumerate(specs)
    ]


def test_decode_first_then_continuing_then_waiting_under_the_budget(qwen8b):
    sched = DuetScheduler(PartitionOptimizer(qwen8b, 10.0), token_budget=100)
    decoding = states((50, 10), (60, 10), prefilled=0)
    for r in decoding:
        r.prefilled, r.generated = r.request.prompt_len, 1
    half = RequestState(Request(9, 0.0, 80, 5), prefilled=30)
    waiting = [RequestState(Request(10, 0.0, 70, 5)), RequestState(Request(11, 0.0, 5, 5))]
    batch, plan = sched.step(waiting, [*decoding, half])
    assert batch.decodes == decoding
    assert [(r.request.id, q) for r, q in batch.prefills] == [(9, 50), (10, 48)]
    assert batch.admitted == [waiting[0]]
    assert batch.num_tokens == 100
    assert plan.mode == "aggregated"


def test_admission_is_fcfs_and_respects_kv_and_max_seqs(qwen8b):
    sched = DuetScheduler(
        PartitionOptimizer(qwen8b, 10.0), token_budget=1000, kv_capacity_tokens=150
    )
    waiting = states((100, 20), (10, 10), (100, 60))
    batch, _ = sched.step(waiting, [])
    assert batch.admitted == waiting[:2]  # 120 + 20 of 150 slots
    batch, _ = sched.step(waiting[2:] + waiting[1:2], [])
    assert batch.admitted == []  # the head (160 slots) blocks a request that would fit
    small = DuetScheduler(PartitionOptimizer(qwen8b, 10.0), token_budget=1000, max_num_seqs=1)
    assert len(small.step(states((1, 1), (1, 1)), [])[0].admitted) == 1


def test_fallback_cap_shortens_chunks(qwen8b):
    sched = DuetScheduler(PartitionOptimizer(qwen8b, 1e-4), token_budget=4096)
    running = states(*[(100, 50)] * 8)
    for r in running:
        r.prefilled, r.generated = 100, 1
    batch, plan = sched.step(states((4000, 5), (4000, 5)), running)
    assert plan.reason == "fallback"
    assert sum(q for _, q in batch.prefills) == plan.prefill_token_cap == 16
    assert len(batch.admitted) == 1  # the second request got no tokens: not admitted


def _window_gaps(model, plan, batch):
    """Every token gap of a spatial window by the roofline: k - 1 decode steps inside it, and the
    gap into the next iteration, which includes any stall waiting on the prefill pass."""
    t_d = model.iteration_latency(batch.decode_seqs(), plan.n_sm_decode)
    t_p = model.iteration_latency(batch.prefill_seqs(), plan.n_sm_prefill)
    k = plan.lookahead
    return [t_d] * (k - 1) + [t_d + max(t_p - k * t_d, 0.0)]


@pytest.mark.parametrize("slots", [1, 2])
def test_lookahead_reduction_replans_so_every_gap_meets_the_slo(qwen8b, slots):
    running = states(*[(2000, 500)] * 64)
    for r in running:
        r.prefilled, r.generated = 2000, 1
    sched = DuetScheduler(PartitionOptimizer(qwen8b, 0.05), token_budget=8192)
    _, free = sched.step(states((8000, 10)), running, kv_free_tokens=1e9)
    assert free.mode == "spatial" and free.lookahead > 1 + slots
    tight = 8010 + 64 * slots  # the new request's reservation, then look-ahead slots per decode
    with pytest.warns(LookaheadReducedWarning, match=f"look-ahead at most {1 + slots}"):
        batch, plan = sched.step(states((8000, 10)), running, kv_free_tokens=tight)
    assert sched.lookahead_reductions == 1
    assert plan.lookahead <= 1 + slots
    if plan.mode == "spatial":  # re-chosen split: k t_d >= t_p, so no stall
        gaps = _window_gaps(qwen8b, plan, batch)
    else:  # no split fits that k: the fallback's capped mixed batch
        assert plan.reason == "fallback" and batch.num_tokens <= 64 + plan.prefill_token_cap
        gaps = [qwen8b.iteration_latency(batch.decode_seqs() + batch.prefill_seqs(), 132)]
    assert max(gaps) <= 0.05 + 1e-12
    # The old behaviour (k lowered, split and window kept) stalls past the SLO.
    stale = dataclasses.replace(free, lookahead=1 + slots)
    full, _ = DuetScheduler(PartitionOptimizer(qwen8b, 0.05), 8192).step(
        states((8000, 10)), running, kv_free_tokens=1e9
    )
    assert max(_window_gaps(qwen8b, stale, full)) > 0.05


@pytest.mark.parametrize("budget", [0, -5, 1.5, True])
def test_bad_token_budget(qwen8b, budget):
    with pytest.raises(ValueError, match="token_budget"):
        DuetScheduler(PartitionOptimizer(qwen8b, 0.05), token_budget=budget)
