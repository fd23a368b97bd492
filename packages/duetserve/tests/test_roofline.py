import numpy as np
import pytest
from duetserve import BatchStats, HardwareProfile, ModelShape, RooflineModel, Seq


def test_a_single_gemm_is_the_closed_form(tiny_model):
    # The QKV projection of N tokens: one (N x d) @ (d x (h + 2 h_kv) d_h) GEMM per layer.
    s = tiny_model.shape
    n_tok, n_sm = 37, 6
    out = (s.n_heads + 2 * s.n_kv_heads) * s.d_head
    flops = 2 * n_tok * s.d_model * out * s.n_layers
    nbytes = (s.d_model * out * s.bytes_w + n_tok * (s.d_model + out) * s.bytes_act) * s.n_layers
    pi = 1e12 * n_sm / 16
    bw = 1e10 * min(1.0, n_sm / 8)
    bd = tiny_model.iteration_latency([Seq(0, n_tok)], n_sm, breakdown=True)
    assert bd.flops["qkv_proj"] == flops
    assert bd.bytes["qkv_proj"] == nbytes
    assert bd.seconds["qkv_proj"] == pytest.approx(max(flops / pi, nbytes / bw), rel=1e-12)


def test_decode_attention_bytes_by_hand(qwen8b):
    # B decodes at context c read B (c + 1) 2 n_kv d_h b KV bytes per layer.
    b, c = 24, 3000
    s = qwen8b.shape
    bd = qwen8b.iteration_latency([Seq(c)] * b, breakdown=True)
    kv = b * (c + 1) * 2 * s.n_kv_heads * s.d_head * s.bytes_kv * s.n_layers
    act = b * (s.n_heads + 2 * s.n_kv_heads) * s.d_head * s.bytes_act * s.n_layers
    assert bd.bytes["attn_decode"] == kv + act
    assert bd.flops["attn_decode"] == 4 * s.n_heads * s.d_head * b * (c + 1) * s.n_layers
    assert bd.bound["attn_decode"] == "memory"
    assert bd.total == pytest.approx(qwen8b.iteration_latency([Seq(c)] * b))


def test_causal_prefill_attention_flops(qwen8b):
    s = qwen8b.shape
    q, c = 512, 1000
    bd = qwen8b.iteration_latency([Seq(c, q)], breakdown=True)
    assert bd.flops["attn_prefill"] == pytest.approx(
        4 * s.n_heads * s.d_head * q * (c + (q + 1) / 2) * s.n_layers
    )


def test_equal_tokens_at_different_contexts_differ(qwen8b):
    # A token-budget model prices these alike; the attention-aware roofline does not.
    short = qwen8b.iteration_latency([Seq(128)] * 64)
    long = qwen8b.iteration_latency([Seq(8192)] * 64)
    assert long > 1.5 * short


def test_monotone_in_sms_tokens_and_context(qwen8b):
    rng = np.random.default_rng(0)
    n = np.arange(2, 133, 2)
    for _ in range(20):
        batch = [
            Seq(int(c), int(q))
            for c, q in zip(rng.integers(0, 4000, 6), rng.choice([1, 1, 64, 700], 6), strict=True)
        ]
        curve = qwen8b.latency_curve(batch, n)
        assert np.all(np.diff(curve) <= 1e-15)
        more_ctx = [Seq(x.context + 100, x.new_tokens) for x in batch]
        more_tok = [*batch, Seq(10, 1)]
        base = qwen8b.iteration_latency(batch)
        assert qwen8b.iteration_latency(more_ctx) >= base
        assert qwen8b.iteration_latency(more_tok) >= base


def test_the_paper_premises_hold_on_the_assumed_h100(qwen8b):
    # An 8K-token prefill iteration takes > 180 ms; decode reaches most of its all-SM speed on a
    # third of the SMs.
    assert qwen8b.iteration_latency([Seq(0, 8192)]) > 0.18
    dec = [Seq(2048)] * 64
    assert qwen8b.iteration_latency(dec, 46) < 1.2 * qwen8b.iteration_latency(dec)
    assert qwen8b.iteration_latency([Seq(0, 8192)], 46) > 2.5 * qwen8b.iteration_latency(
        [Seq(0, 8192)]
    )


def test_vector_and_scalar_agree_and_stats_add(qwen8b):
    batch = [Seq(100), Seq(3000), Seq(0, 900), Seq(50, 70)]
    curve = qwen8b.latency_curve(batch, [10, 66, 132])
    assert curve[2] == pytest.approx(qwen8b.iteration_latency(batch))
    assert curve[0] == pytest.approx(qwen8b.iteration_latency(batch, 10))
    assert BatchStats.of(batch[:2]) + BatchStats.of(batch[2:]) == BatchStats.of(batch)
    assert qwen8b.iteration_latency([]) == 0.0


def test_tensor_parallel_adds_allreduce_and_splits_weights(h100):
    one = RooflineModel(ModelShape.qwen3_8b(), h100)
    two = RooflineModel(ModelShape.qwen3_8b(tp=2), h100)
    batch = [Seq(0, 4096)]
    bd = two.iteration_latency(batch, breakdown=True)
    s = two.shape
    expected = 2 * s.n_layers * (2 * 1 / 2) * 4096 * s.d_model * 2 / h100.link_bw
    assert bd.seconds["allreduce"] == pytest.approx(expected)
    assert one.iteration_latency(batch, breakdown=True).seconds["allreduce"] == 0.0
    assert bd.seconds["mlp_up"] == pytest.approx(
        one.iteration_latency(batch, breakdown=True).seconds["mlp_up"] / 2
    )


def test_bad_inputs(qwen8b):
    with pytest.raises(ValueError, match="new_tokens >= 1"):
        Seq(10, 0)
    with pytest.raises(ValueError, match="context >= 0"):
        Seq(-1)
    with pytest.raises(ValueError, match=r"n_sm must be an integer in \(0, 132\]"):
        qwen8b.iteration_latency([Seq(1)], 0)
    with pytest.raises(ValueError, match="SM counts must be > 0"):
        qwen8b.latency_curve([Seq(1)], [0, 2])
    hw = HardwareProfile.h100_sxm_spec(link_bw=0.0)
    with pytest.raises(ValueError, match="link_bw"):
        RooflineModel(ModelShape.qwen3_8b(tp=2), hw)


@pytest.mark.parametrize("bad", [{"context": 2.5}, {"context": float("nan")}, {"new_tokens": 1.5}])
def test_seq_refuses_non_integer_counts(bad):
    with pytest.raises(ValueError, match="integer"):
        Seq(**{"context": 3, "new_tokens": 1, **bad})
    assert Seq(np.int64(3), np.int32(2)).new_tokens == 2
