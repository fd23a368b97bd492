import math

import numpy as np
import pytest
from duetserve import Request, RooflineModel, Seq, poisson_trace, simulate
from duetserve import simulator as sim


def test_aggregated_with_unbounded_budget_matches_the_hand_example(tiny_model):
    trace = [Request(0, 0.0, 4, 3), Request(1, 0.0, 2, 2)]
    r = simulate(trace, "aggregated", tiny_model, token_budget=10**9)
    t1 = tiny_model.iteration_latency([Seq(0, 4), Seq(0, 2)])
    t2 = tiny_model.iteration_latency([Seq(4), Seq(2)])
    t3 = tiny_model.iteration_latency([Seq(5)])
    np.testing.assert_allclose(r.ttft, [t1, t1])
    np.testing.assert_allclose(r.finish, [t1 + t2 + t3, t1 + t2])
    assert sorted(np.repeat(r.tbt, r.tbt_weight.astype(int))) == pytest.approx(sorted([t2, t2, t3]))
    assert (
        r.generated_tokens == 5 and r.iterations == 3 and r.makespan == pytest.approx(t1 + t2 + t3)
    )


def test_disaggregated_matches_the_queueing_hand_example(tiny_model):
    # Deterministic service S on the prefill GPU, FCFS: arrivals 0, S/2, 3S wait 0, S/2, 0.
    s = tiny_model.iteration_latency([Seq(0, 8)])
    trace = [Request(0, 0.0, 8, 2), Request(1, s / 2, 8, 2), Request(2, 3 * s, 8, 2)]
    r = simulate(trace, "disaggregated", tiny_model, token_budget=8, kv_transfer_bw=1e9)
    np.testing.assert_allclose(r.ttft, [s, 1.5 * s, s])
    transfer = 8 * tiny_model.shape.kv_bytes_per_token / 1e9
    d = tiny_model.iteration_latency([Seq(8)])
    # request 1's decode overlaps request 0's only if their KV arrivals do: here they are s apart
    assert transfer + d < s
    np.testing.assert_allclose(
        r.finish, [s + transfer + d, 2 * s + transfer + d, 4 * s + transfer + d]
    )
    assert r.n_gpus == 2


@pytest.mark.parametrize("policy", sim.POLICIES)
def test_every_request_is_conserved(qwen8b, policy):
    trace = poisson_trace(8.0, 60, "conversation", seed=3)
    r = simulate(trace, policy, qwen8b, tbt_slo_s=0.05, max_time=trace[40].arrival)
    assert r.finished + r.unfinished == 60
    assert 0 < r.finished < 60
    full = simulate(trace, policy, qwen8b, tbt_slo_s=0.05)
    assert full.unfinished == 0
    expected = sum(q.output_len for q in trace)
    assert full.generated_tokens == expected
    assert np.all(np.isfinite(full.ttft)) and np.all(full.finish >= full.ttft)


def test_a_request_larger_than_the_cache_is_reported_unfinished(qwen8b):
    trace = [Request(0, 0.0, 100, 10), Request(1, 0.1, 5000, 10), Request(2, 0.2, 100, 10)]
    r = simulate(trace, "duet", qwen8b, kv_capacity=1000)
    assert r.unfinished == 1 and math.isnan(r.finish[1])


@pytest.mark.parametrize("policy", ["aggregated", "duet", "static_spatial", "disaggregated"])
def test_an_infinitely_fast_gpu_gives_zero_tbt(qwen8b, policy):
    fast = RooflineModel(qwen8b.shape, qwen8b.hw.with_infinite_speed())
    r = simulate(poisson_trace(2.0, 30, "conversation", seed=1), policy, fast, tbt_slo_s=0.05)
    assert r.tbt.max() < 1e-9 and np.nanmax(r.ttft) < 1e-9


def test_bulk_decode_steps_equal_one_step_at_a_time(qwen8b, monkeypatch):
    trace = poisson_trace(4.0, 40, "conversation", seed=5)
    bulk = simulate(trace, "duet", qwen8b, tbt_slo_s=0.03)
    monkeypatch.setattr(sim, "MAX_BULK_STEPS", 1)
    step = simulate(trace, "duet", qwen8b, tbt_slo_s=0.03)
    np.testing.assert_allclose(bulk.finish, step.finish, rtol=1e-9)
    np.testing.assert_allclose(bulk.ttft, step.ttft, rtol=1e-9)
    assert bulk.iterations == step.iterations
    for q in (0.5, 0.9, 0.99):
        assert bulk.tbt_quantile(q) == pytest.approx(step.tbt_quantile(q), rel=1e-9)


def test_duet_protects_tbt_under_long_prompts(qwen8b):
    trace = poisson_trace(4.0, 150, "mooncake", seed=0)
    agg = simulate(trace, "aggregated", qwen8b, tbt_slo_s=0.05)
    duet = simulate(trace, "duet", qwen8b, tbt_slo_s=0.05, keep_plans=True)
    assert agg.tbt_quantile(0.99) > 0.15  # 8K-token mixed iterations stall the decodes
    assert duet.tbt_quantile(0.99) < 0.06
    assert 0 < duet.spatial_fraction < 1
    spatial = [p for p in duet.plans if p.mode == "spatial"]
    assert spatial and all(p.predicted["t_decode"] <= 0.05 for p in spatial)


def test_weighted_quantile_is_the_repeated_sample_quantile():
    rng = np.random.default_rng(0)
    v, w = rng.normal(size=50), rng.integers(1, 5, 50)
    rep = np.sort(np.repeat(v, w))
    for q in (0.1, 0.5, 0.99):
        assert sim.weighted_quantile(v, w.astype(float), q) == np.quantile(
            rep, q, method="inverted_cdf"
        )


def test_bad_policy_and_traces(qwen8b):
    with pytest.raises(ValueError, match="policy must be one of"):
        simulate([Request(0, 0.0, 1, 1)], "fcfs", qwen8b)
    with pytest.raises(ValueError, match="prompt_len=0"):
        simulate([Request(0, 0.0, 0, 1)], "duet", qwen8b)
    with pytest.raises(ValueError, match="non-decreasing"):
        simulate([Request(0, 1.0, 5, 1), Request(1, 0.5, 5, 1)], "duet", qwen8b)
    with pytest.raises(ValueError, match="static_decode_fraction"):
        simulate([Request(0, 0.0, 1, 1)], "static_spatial", qwen8b, static_decode_fraction=1.0)


def test_an_empty_run_reports_nan_throughput_not_inf(tiny_model):
    r = simulate([], "aggregated", tiny_model)
    assert math.isnan(r.throughput_tokens) and math.isnan(r.request_throughput)


# ---- one spatial window, priced by hand ----------------------------------------------------------
def _window(model, reason, k, remaining, prompt, shared_bandwidth=False):
    """One spatial window: a decode on 40 cached tokens with ``remaining`` tokens to go, beside a
    ``prompt``-token prefill, ``k`` decode steps on 20 SMs and the prefill on the other 112."""
    from duetserve.optimizer import PartitionPlan
    from duetserve.scheduler import Batch

    rec = sim._Recorder(2, keep_plans=False)
    dec = sim._State(Request(0, 0.0, 30, 11 + remaining), prefilled=30, generated=11)
    dec.last_token = 0.0
    pre = sim._State(Request(1, 0.0, prompt, 4))
    engine = sim._Engine("duet", model, None, rec, 20, shared_bandwidth)
    plan = PartitionPlan("spatial", 20, model.hw.n_sm - 20, k, reason, {})
    end = engine.execute(Batch([dec], [(pre, prompt)], []), plan, 1.0)
    return rec, dec, pre, end


def _steps(model, k):
    # Step i reads the 40 cached tokens plus i more (KV grows one row per step).
    return [model.iteration_latency([Seq(40 + i)], 20) for i in range(k)]


@pytest.mark.parametrize("reason, wasted", [("spatial", 3), ("static", 0)])
def test_a_window_defers_stop_checks_and_counts_the_tokens_past_the_stop(qwen8b, reason, wasted):
    # k = 5 steps for a decode with 2 tokens left: DuetServe's window computes all 5 (stop checks
    # deferred), 3 wasted; a static split's free-running stream stops at the stop (none wasted).
    rec, dec, _, _ = _window(qwen8b, reason, k=5, remaining=2, prompt=64)
    steps = _steps(qwen8b, 5)
    assert rec.wasted == wasted
    assert dec.generated == 13 and rec.generated == 3  # 2 decoded + the prefill's first token
    assert dec.last_token == pytest.approx(1.0 + steps[0] + steps[1], rel=1e-12)
    assert rec.gaps == pytest.approx([1.0 + steps[0], steps[1]], rel=1e-12)


def test_a_window_ends_with_its_slower_side(qwen8b):
    # A short prefill: the window is the k decode steps (each one KV row longer than the last).
    _, _, _, end = _window(qwen8b, "spatial", k=4, remaining=10, prompt=32)
    t_p = qwen8b.iteration_latency([Seq(0, 32)], qwen8b.hw.n_sm - 20)
    steps = _steps(qwen8b, 4)
    assert sum(steps) > t_p
    assert end == pytest.approx(1.0 + sum(steps), rel=1e-12)
    # A long prefill: the decodes idle until the prefill pass ends.
    rec, _, _, end = _window(qwen8b, "spatial", k=1, remaining=10, prompt=8000)
    t_p = qwen8b.iteration_latency([Seq(0, 8000)], qwen8b.hw.n_sm - 20)
    assert t_p > _steps(qwen8b, 1)[0]
    assert end == pytest.approx(1.0 + t_p, rel=1e-12)
    assert rec.ttft[1] == pytest.approx(1.0 + t_p, rel=1e-12)


def test_decode_latencies_grow_one_kv_row_per_decode_per_step(qwen8b):
    ctx = [100, 2000, 7000]
    got = sim.decode_latencies(qwen8b, 20, 3, float(sum(c + 1 for c in ctx)), 6)
    want = [qwen8b.iteration_latency([Seq(c + i) for c in ctx], 20) for i in range(6)]
    assert got == pytest.approx(want, rel=1e-12)
    assert got[-1] > got[0]


def test_shared_bandwidth_caps_the_prefill_at_what_the_decodes_leave(qwen8b):
    from duetserve.roofline import BatchStats, features

    hw = qwen8b.hw
    _, _, _, end = _window(qwen8b, "spatial", k=1, remaining=10, prompt=8000, shared_bandwidth=True)
    bw = float(hw.bw_curve(hw.n_sm)) - float(hw.bw_curve(20))
    assert 0 < bw < float(hw.bw_curve(hw.n_sm - 20))  # the knee at 35 %: the cap binds
    row = features(BatchStats.of([Seq(0, 8000)]))[None]
    t_p = qwen8b.latency_rows(row, 1 / hw.flops_curve(np.array([hw.n_sm - 20])), np.array([1 / bw]))
    assert end == pytest.approx(1.0 + float(t_p[0, 0]), rel=1e-12)
    _, _, _, free = _window(qwen8b, "spatial", k=1, remaining=10, prompt=8000)
    assert end > free


def test_duplicate_request_ids_are_refused(tiny_model):
    trace = [Request(0, 0.0, 10, 2), Request(0, 1.0, 10, 2)]
    with pytest.raises(ValueError, match=r"unique; repeated: \[0\]"):
        simulate(trace, "duet", tiny_model, tbt_slo_s=0.05)
