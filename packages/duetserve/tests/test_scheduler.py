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


def test_lookahead_is_reduced_with_a_warning_when_kv_headroom_is_short(qwen8b):
    running = states(*[(2000, 500)] * 64)
    for r in running:
        r.prefilled, r.generated = 2000, 1
    waiting = states((8000, 10))
    sched = DuetScheduler(PartitionOptimizer(qwen8b, 0.05), token_budget=8192)
    _, free = sched.step(waiting, running, kv_free_tokens=1e9)
    assert free.mode == "spatial" and free.lookahead > 2
    tight = 8010 + 64  # the new request's reservation, then one look-ahead slot per decode
    with pytest.warns(LookaheadReducedWarning, match="look-ahead reduced to 2"):
        _, plan = sched.step(states((8000, 10)), running, kv_free_tokens=tight)
    assert plan.lookahead == 2
    assert sched.lookahead_reductions == 1


@pytest.mark.parametrize("budget", [0, -5, 1.5, True])
def test_bad_token_budget(qwen8b, budget):
    with pytest.raises(ValueError, match="token_budget"):
        DuetScheduler(PartitionOptimizer(qwen8b, 0.05), token_budget=budget)
