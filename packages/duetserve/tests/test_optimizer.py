import math

import numpy as np
import pytest
from duetserve import (
    BatchStats,
    HardwareProfile,
    ModelShape,
    PartitionOptimizer,
    RooflineModel,
    Seq,
)


def brute_force(model, slo, decodes, prefills, g=2, k_max=8):
    """Every (n_d, k) by direct roofline calls: the best feasible overlap throughput."""
    n = model.hw.n_sm
    best = None
    for n_d in range(g, n - g + 1, g):
        t_d = model.iteration_latency(decodes, n_d)
        t_p = model.iteration_latency(prefills, n - n_d)
        for k in range(1, k_max + 1):
            best = _better(best, slo, decodes, prefills, n_d, k, t_d, t_p)
    return best


def _better(best, slo, decodes, prefills, n_d, k, t_d, t_p):
    window = max(k * t_d, t_p)
    if t_d > slo or k * t_d < t_p:  # over the SLO, or the decodes would stall on the prefill
        return best
    thr = (k * len(decodes) + sum(p.new_tokens for p in prefills)) / window
    if best is None or thr > best[0] * (1 + 1e-12):
        return (thr, n_d, k)
    return best


def random_batch(rng):
    decodes = [Seq(int(c)) for c in rng.integers(16, 8000, int(rng.integers(1, 200)))]
    prefills = [
        Seq(int(c), int(q))
        for c, q in zip(rng.integers(0, 4000, 2), rng.integers(200, 6000, 2), strict=True)
    ]
    return decodes, prefills


def test_equals_brute_force_over_nd_and_k(qwen8b):
    rng = np.random.default_rng(1)
    checked = 0
    for _ in range(12):
        decodes, prefills = random_batch(rng)
        slo = float(rng.choice([0.02, 0.04, 0.08]))
        plan = PartitionOptimizer(qwen8b, slo).plan(decodes, prefills)
        best = brute_force(qwen8b, slo, decodes, prefills)
        if plan.mode != "spatial":
            assert plan.reason in ("fits", "fallback")
            if plan.reason == "fallback":
                assert best is None
            continue
        checked += 1
        assert best is not None
        assert plan.predicted["score"] == pytest.approx(best[0], rel=1e-9)
        assert (plan.n_sm_decode, plan.lookahead) == (best[1], best[2])
    assert checked >= 5  # the oracle really compared spatial plans


def test_every_spatial_plan_meets_the_tbt_bound(qwen8b):
    rng = np.random.default_rng(2)
    spatial = 0
    for _ in range(60):
        decodes, prefills = random_batch(rng)
        slo = float(rng.uniform(0.01, 0.1))
        plan = PartitionOptimizer(qwen8b, slo).plan(decodes, prefills)
        if plan.mode == "spatial":
            spatial += 1
            t_d = qwen8b.iteration_latency(decodes, plan.n_sm_decode)
            assert t_d <= slo
            assert plan.n_sm_decode + plan.n_sm_prefill == 132
            assert plan.n_sm_decode % 2 == 0
            t_p = qwen8b.iteration_latency(prefills, plan.n_sm_prefill)
            assert plan.lookahead * t_d >= t_p  # the decode stream covers the prefill pass
            assert plan.lookahead == max(math.ceil(t_p / t_d), 1)
    assert spatial > 20


def test_a_batch_that_fits_stays_aggregated(qwen8b):
    decodes, prefills = [Seq(500)] * 16, [Seq(0, 256)]
    assert qwen8b.iteration_latency(decodes + prefills) < 0.1
    plan = PartitionOptimizer(qwen8b, 0.1).plan(decodes, prefills)
    assert (plan.mode, plan.reason, plan.n_sm_decode) == ("aggregated", "fits", 132)
    only_decodes = PartitionOptimizer(qwen8b, 1e-4).plan(decodes, [])
    assert (only_decodes.mode, only_decodes.reason) == ("aggregated", "no_overlap")


def test_an_impossible_slo_takes_the_fallback(qwen8b):
    decodes, prefills = [Seq(4000)] * 64, [Seq(0, 4096)]
    plan = PartitionOptimizer(qwen8b, 1e-4).plan(decodes, prefills)
    assert (plan.mode, plan.reason) == ("aggregated", "fallback")
    assert plan.prefill_token_cap == 16  # nothing meets 0.1 ms: prefills still progress
    # A tight but feasible-by-chunking SLO: the cap is the largest chunk that meets it.
    slo = qwen8b.iteration_latency([*decodes, Seq(0, 1000)]) + 1e-9
    opt = PartitionOptimizer(qwen8b, slo, lookahead=1)
    cap = opt.prefill_cap(*_stats(decodes), [Seq(0, 4096)])[0]
    assert cap == 1000


def _stats(decodes):
    from duetserve import BatchStats

    return (BatchStats.of(decodes),)


def test_fixed_lookahead_and_custom_objective(qwen8b):
    decodes, prefills = [Seq(2000)] * 64, [Seq(0, 8000)]
    plan = PartitionOptimizer(qwen8b, 0.05, lookahead=6).plan(decodes, prefills)
    assert plan.mode == "spatial" and plan.lookahead == 6
    # too short a window leaves the decodes idle past the SLO: no split qualifies
    short = PartitionOptimizer(qwen8b, 0.05, lookahead=2).plan(decodes, prefills)
    assert short.reason == "fallback"

    def decode_only(k, n_dec, p_tok, t_d, t_p):
        return k * n_dec / np.maximum(k * t_d, t_p)

    plan2 = PartitionOptimizer(qwen8b, 0.05, objective=decode_only).plan(decodes, prefills)
    assert plan2.mode == "spatial"
    t_d = qwen8b.iteration_latency(decodes, plan2.n_sm_decode)
    assert t_d <= 0.05


def test_granularity_rules(h100):
    model = RooflineModel(ModelShape.qwen3_8b(), h100)
    assert PartitionOptimizer(model, 0.05).candidates.size == 65
    assert PartitionOptimizer(model, 0.05, granularity_sm=8).candidates[0] == 8
    with pytest.raises(ValueError, match="granted granularity is 2 SMs"):
        PartitionOptimizer(model, 0.05, granularity_sm=3)
    gc = RooflineModel(ModelShape.qwen3_8b(), HardwareProfile.h100_sxm_spec(min_partition_sm=8))
    with pytest.raises(
        ValueError, match="minimum partition of 8 SMs; the granted granularity is 8"
    ):
        PartitionOptimizer(gc, 0.05, granularity_sm=4)


@pytest.mark.parametrize("slo", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_slo(qwen8b, slo):
    with pytest.raises(ValueError, match="tbt_slo_s"):
        PartitionOptimizer(qwen8b, slo)


def test_bad_lookahead_and_mixed_up_batches(qwen8b):
    with pytest.raises(ValueError, match="max_lookahead"):
        PartitionOptimizer(qwen8b, 0.05, max_lookahead=0)
    with pytest.raises(ValueError, match="lookahead must lie"):
        PartitionOptimizer(qwen8b, 0.05, lookahead=9)
    with pytest.raises(ValueError, match="decodes must all have new_tokens == 1"):
        PartitionOptimizer(qwen8b, 0.05).plan([Seq(0, 10)], [Seq(0, 10)])


def test_prefill_cap_prices_a_one_token_chunk_as_the_batch_does(qwen8b):
    from duetserve.optimizer import cap_prefills

    opt = PartitionOptimizer(qwen8b, 0.05, min_prefill_tokens=0)
    d = BatchStats.of([Seq(3000)] * 128)
    # Caps 6001 and 6002 leave a one-token chunk beside a long, compute-bound one: priced as a
    # prefill, its KV reads would hide under the long chunk's compute-bound max.
    prefills = [Seq(0, 6000), Seq(8000, 1), Seq(100, 3000)]
    for cap in (6001, 6002):
        chunks = cap_prefills(prefills, cap)
        assert any(c.new_tokens == 1 for c in chunks)
        want = qwen8b.iteration_latency([Seq(3000)] * 128 + chunks)
        opt.tbt_slo_s = want + 1e-12  # the cap search stops exactly at this cap
        got_cap, got = opt.prefill_cap(d, prefills)
        assert got_cap == cap
        assert got == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize(
    "kw",
    [{"max_lookahead": 2.5}, {"max_lookahead": True}, {"lookahead": 1.5}],
)
def test_non_integer_lookahead_is_refused(qwen8b, kw):
    with pytest.raises(ValueError, match="lookahead"):
        PartitionOptimizer(qwen8b, 0.05, **kw)


def test_numpy_float_slo_is_accepted(qwen8b):
    assert PartitionOptimizer(qwen8b, np.float32(0.05)).tbt_slo_s == pytest.approx(0.05)
    with pytest.raises(ValueError, match="tbt_slo_s"):
        PartitionOptimizer(qwen8b, np.float32("nan"))


def test_plan_max_lookahead_must_be_a_positive_integer(qwen8b):
    with pytest.raises(ValueError, match="max_lookahead"):
        PartitionOptimizer(qwen8b, 0.05).plan([Seq(10)], [Seq(0, 100)], max_lookahead=0)


def test_t_mix_is_the_roofline_of_the_mixed_batch(qwen8b):
    """The mixed batch reads the weights once: t_mix is the roofline of decodes + prefills (an
    earlier version summed the two parts' costs and read the weights twice, so batches that fit
    the SLO were split or capped)."""
    rng = np.random.default_rng(5)
    for _ in range(10):
        decodes, prefills = random_batch(rng)
        plan = PartitionOptimizer(qwen8b, 1e-3).plan(decodes, prefills)
        want = qwen8b.iteration_latency(decodes + prefills)
        assert plan.predicted["t_mix"] == pytest.approx(want, rel=1e-12)
    decodes, prefills = [Seq(500)] * 16, [Seq(0, 256)]
    t = qwen8b.iteration_latency(decodes + prefills)
    # Reading the weights twice costs more than 1 ms on an H100: a 0.5 ms margin must fit.
    plan = PartitionOptimizer(qwen8b, t + 5e-4).plan(decodes, prefills)
    assert (plan.mode, plan.reason) == ("aggregated", "fits")


def test_min_prefill_tokens_must_be_an_integer(qwen8b):
    with pytest.raises(ValueError, match=r"min_prefill_tokens must be an integer >= 0, got 1\.5"):
        PartitionOptimizer(qwen8b, 0.05, min_prefill_tokens=1.5)


@pytest.mark.parametrize("where", ["decodes", "prefills"])
def test_plan_refuses_tuples_for_seqs(qwen8b, where):
    d, p = [Seq(10)], [Seq(0, 100)]
    if where == "decodes":
        d = [(10, 1)]
    else:
        p = [(0, 100)]
    with pytest.raises(ValueError, match=r"Seq\(context, new_tokens\) items, got tuple"):
        PartitionOptimizer(qwen8b, 0.05).plan(d, p)


def test_prefill_cap_without_prefills_or_floor_is_the_decodes_alone(qwen8b):
    decodes = [Seq(3000)] * 32
    alone = qwen8b.iteration_latency(decodes)
    opt = PartitionOptimizer(qwen8b, 0.05)
    assert opt.prefill_cap(BatchStats.of(decodes), []) == (0, pytest.approx(alone, rel=1e-12))
    tight = PartitionOptimizer(qwen8b, alone / 2, min_prefill_tokens=0)
    assert tight.prefill_cap(BatchStats.of(decodes), [Seq(0, 500)]) == (
        0,
        pytest.approx(alone, rel=1e-12),
    )
