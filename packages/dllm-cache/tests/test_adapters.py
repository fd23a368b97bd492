"""The cache on Hugging Face Llama-style layers, Dream-style tuple layers, save/load, removal."""

import pytest
import torch
from dllm_cache import (
    ADAPTERS,
    DLLMCacheConfig,
    TinyLLaDA,
    apply_dllm_cache,
    generate,
    resolve_adapter,
)
from torch import nn

MASK = 3


@pytest.fixture
def llama():
    models = pytest.importorskip("shared_core.models")
    model = models.tiny_llama(
        vocab_size=48, hidden_size=32, num_layers=2, num_heads=4, num_key_value_heads=2,
        intermediate_size=64, bidirectional=True, seed=0, initializer_range=0.1,
        pad_token_id=0,
    )  # fmt: skip
    return model.eval()


def _plain(model, handle, x):
    saved, handle.cache.prompt_length = handle.cache.prompt_length, None
    try:
        return model(x).logits
    finally:
        handle.cache.prompt_length = saved


def test_llama_adapter_identity_and_static_input(llama, prompts):
    assert resolve_adapter(llama).name == "llama"
    x = torch.cat([prompts(2, 20), torch.full((2, 8), MASK)], 1)
    with apply_dllm_cache(llama, DLLMCacheConfig(1, 1, 0.25)) as handle:
        handle.cache.reset(20)
        torch.testing.assert_close(llama(x).logits, _plain(llama, handle, x), rtol=0, atol=1e-5)
    with apply_dllm_cache(llama, DLLMCacheConfig(100, 100, 0.5)) as handle:
        handle.cache.reset(20)
        expected = _plain(llama, handle, x)
        llama(x)
        torch.testing.assert_close(llama(x).logits, expected, rtol=0, atol=1e-5)
        assert handle.cache.stats.records[-1].case == "D"


def test_llama_generate_with_interval_one_matches_and_padding_is_honoured(llama, prompts):
    x = prompts(2, 16)
    kw = dict(mask_id=MASK, gen_length=8, block_length=4, steps=8)
    plain = generate(llama, x, **kw)
    with apply_dllm_cache(llama, DLLMCacheConfig(1, 1, 0.0)) as handle:
        assert torch.equal(plain, generate(llama, x, **kw, cache=handle.cache))
    short = x[1:, 5:]
    padded = x.clone()
    padded[1, :5] = 0
    mask = torch.ones_like(padded)
    mask[1, :5] = 0
    with apply_dllm_cache(llama, DLLMCacheConfig(4, 2, 0.25)) as handle:
        together = generate(llama, padded, mask, **kw, cache=handle.cache)
        alone = generate(llama, short, **kw, cache=handle.cache)
    assert torch.equal(together[1], alone[0])


def test_causal_llama_is_refused():
    models = pytest.importorskip("shared_core.models")
    causal = models.tiny_llama(vocab_size=16, hidden_size=16, num_layers=1, num_heads=2)
    with pytest.raises(ValueError, match="bidirectional"):
        apply_dllm_cache(causal)


class TupleLayer(nn.Module):
    """A Dream-style layer: Llama's decoder layer, but returning ``(hidden_states,)``."""

    def __init__(self, layer):
        super().__init__()
        self.inner = layer
        self.input_layernorm = layer.input_layernorm
        self.self_attn = layer.self_attn
        self.post_attention_layernorm = layer.post_attention_layernorm
        self.mlp = layer.mlp

    def forward(self, hidden_states, position_embeddings=None, attention_mask=None):
        return (
            self.inner(
                hidden_states,
                attention_mask=attention_mask,
                position_embeddings=position_embeddings,
            ),
        )


class DreamToy(nn.Module):
    def __init__(self, llama):
        super().__init__()
        self.config = llama.config
        self.model = nn.Module()
        self.model.embed_tokens = llama.model.embed_tokens
        self.model.rotary_emb = llama.model.rotary_emb
        self.model.norm = llama.model.norm
        self.model.layers = nn.ModuleList(TupleLayer(layer) for layer in llama.model.layers)
        self.lm_head = llama.lm_head

    def forward(self, input_ids):
        h = self.model.embed_tokens(input_ids)
        pos = torch.arange(input_ids.shape[1])[None]
        pe = self.model.rotary_emb(h, pos)
        for layer in self.model.layers:
            h = layer(h, position_embeddings=pe)[0]
        return type("Out", (), {"logits": self.lm_head(self.model.norm(h))})()


def test_dream_adapter_on_tuple_layers(llama, prompts):
    toy = DreamToy(llama)
    x = torch.cat([prompts(1, 12), torch.full((1, 8), MASK)], 1)
    expected = toy(x).logits
    torch.testing.assert_close(expected, llama(x).logits)
    with apply_dllm_cache(toy, DLLMCacheConfig(100, 100, 0.25), adapter="dream") as handle:
        handle.cache.reset(12)
        toy(x)
        torch.testing.assert_close(toy(x).logits, expected, rtol=0, atol=1e-5)


def test_remove_restores_forward_and_handle_is_a_context_manager(model, prompts):
    x = prompts(1, 10)
    kw = dict(mask_id=MASK, gen_length=8, block_length=8, steps=8)
    plain = generate(model, x, **kw)
    blocks = ADAPTERS["llada"].blocks(model)
    handle = apply_dllm_cache(model, DLLMCacheConfig(100, 100, 0.0))
    assert "forward" in blocks[0].__dict__
    cached = generate(model, x, **kw, cache=handle.cache)
    handle.remove()
    handle.remove()  # idempotent
    assert "forward" not in blocks[0].__dict__
    assert torch.equal(generate(model, x, **kw), plain)
    assert not torch.equal(cached, plain)  # Kp = Kr = 100 without update is a different run
    with apply_dllm_cache(model) as handle:
        assert handle.cache.config == DLLMCacheConfig()
    assert "forward" not in blocks[0].__dict__


def test_tiny_llada_round_trips_through_save_and_from_pretrained(model, tmp_path, prompts):
    model.save_pretrained(tmp_path)
    loaded = TinyLLaDA.from_pretrained(tmp_path).eval()
    x = prompts(1, 10)
    assert torch.equal(loaded(x).logits, model(x).logits)
    assert resolve_adapter(loaded).name == "llada"
