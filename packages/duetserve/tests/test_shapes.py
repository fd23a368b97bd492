import pytest
from duetserve import ModelShape
from duetserve.shapes import QWEN3_8B_CONFIG


def test_qwen3_shapes_match_the_published_configs():
    s8, s14 = ModelShape.qwen3_8b(), ModelShape.qwen3_14b()
    assert (s8.n_layers, s8.d_model, s8.n_heads, s8.n_kv_heads, s8.d_head, s8.d_ff, s8.vocab) == (
        36,
        4096,
        32,
        8,
        128,
        12288,
        151936,
    )
    assert (s14.n_layers, s14.d_model, s14.n_heads, s14.n_kv_heads, s14.d_head, s14.d_ff) == (
        40,
        5120,
        40,
        8,
        128,
        17408,
    )
    # Parameter counts: Qwen3-8B has 8.19 B parameters and Qwen3-14B 14.77 B (model cards),
    # untied embeddings included; q/k norms are negligible.
    assert s8.weight_bytes_per_rank / 2 == pytest.approx(8.19e9, rel=0.01)
    assert s14.weight_bytes_per_rank / 2 == pytest.approx(14.77e9, rel=0.01)
    # KV per token: 2 (K, V) * 36 layers * 8 heads * 128 * 2 bytes
    assert s8.kv_bytes_per_token == 2 * 36 * 8 * 128 * 2


def test_from_hf_config_defaults_and_objects():
    cfg = {
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "vocab_size": 10,
    }
    s = ModelShape.from_hf_config(cfg)
    assert (s.n_kv_heads, s.d_head) == (4, 16)

    class Cfg:
        text_config = type("T", (), dict(QWEN3_8B_CONFIG))()

    assert ModelShape.from_hf_config(Cfg()).d_ff == 12288


def test_tp_splits_heads_and_replicates_kv_when_fewer():
    s = ModelShape.qwen3_8b(tp=2)
    assert (s.heads_per_rank, s.kv_heads_per_rank) == (16, 4)
    s16 = ModelShape(
        n_layers=1, d_model=64, n_heads=16, n_kv_heads=2, d_head=4, d_ff=64, vocab=16, tp=8
    )
    assert s16.kv_heads_per_rank == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_layers": 0}, "positive integers"),
        ({"d_model": -1}, "positive integers"),
        ({"n_kv_heads": 3}, "n_kv_heads=3 must divide n_heads=32"),
        ({"tp": 3}, "tp=3 must divide n_heads=32"),
    ],
)
def test_bad_shapes_are_refused(kwargs, match):
    base = dict(
        n_layers=36, d_model=4096, n_heads=32, n_kv_heads=8, d_head=128, d_ff=12288, vocab=151936
    )
    with pytest.raises(ValueError, match=match):
        ModelShape(**{**base, **kwargs})


def test_incomplete_config_is_refused():
    with pytest.raises(ValueError, match="lacks"):
        ModelShape.from_hf_config({"hidden_size": 8})


def test_from_hf_config_refuses_a_fractional_head_dim():
    cfg = {**QWEN3_8B_CONFIG, "head_dim": 128.5}
    with pytest.raises(ValueError, match="head_dim"):
        ModelShape.from_hf_config(cfg)


@pytest.mark.parametrize("head_dim", [0, -8, 12.5])
def test_from_hf_config_refuses_a_bad_head_dim(head_dim):
    cfg = {
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "vocab_size": 100,
        "head_dim": head_dim,
    }
    with pytest.raises(ValueError, match=f"head_dim must be a positive integer, got {head_dim}"):
        ModelShape.from_hf_config(cfg)
