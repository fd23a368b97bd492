"""Spec §8: bad input gives a clear error naming the value."""

import pytest
import torch
from dllm_cache import (
    LLADA_8B,
    DLLMCacheConfig,
    TinyLLaDAConfig,
    apply_dllm_cache,
    dream_generate,
    generate,
    generation_flops,
    num_transfer_tokens,
    schedule,
    select_rows,
)
from torch import nn

MASK = 3
KW = dict(mask_id=MASK, gen_length=8, block_length=4, steps=8)


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        (dict(gen_length=10, block_length=4), "gen_length=10 is not a multiple of block_length=4"),
        (dict(steps=7), "steps=7 is not a multiple of the number of blocks"),
        (dict(steps=0), "steps must be an int >= 1"),
        (dict(mask_id=0), "mask_id=0 equals pad_token_id"),
        (dict(remasking="entropy"), "remasking must be"),
        (dict(temperature=-1.0), "temperature"),
    ],
)
def test_sampler_arguments(model, prompts, changes, match):
    with pytest.raises(ValueError, match=match):
        generate(model, prompts(1, 6), **{**KW, **changes})


def test_mask_in_prompt_and_bad_masks(model, prompts):
    x = prompts(1, 6)
    x[0, 2] = MASK
    with pytest.raises(ValueError, match="prompt contains mask_id=3"):
        generate(model, x, **KW)
    x = prompts(2, 6)
    with pytest.raises(ValueError, match="attention_mask must have the prompt's shape"):
        generate(model, x, torch.ones(2, 5), **KW)
    right_padded = torch.ones(2, 6, dtype=torch.long)
    right_padded[0, -1] = 0
    with pytest.raises(ValueError, match="pad prompts on the left"):
        generate(model, x, right_padded, **KW)
    with pytest.raises(ValueError, match="input_ids must be an integer tensor"):
        generate(model, x[0], **KW)


def test_more_steps_than_tokens_warns(model, prompts):
    with pytest.warns(UserWarning, match="steps=16 > gen_length=8"):
        generate(model, prompts(1, 6), **{**KW, "steps": 16})


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        (dict(transfer_ratio=1.5), r"transfer_ratio must be in \[0, 1\]"),
        (dict(transfer_ratio=-0.1), r"transfer_ratio must be in \[0, 1\]"),
        (dict(transfer_ratio=float("nan")), "transfer_ratio"),
        (dict(prompt_interval=0), "prompt_interval must be an int >= 1"),
        (dict(response_interval=-1), "response_interval must be an int >= 1"),
        (dict(cfg_interval=1.5), "cfg_interval"),
        (dict(selection="query"), "selection must be one of"),
    ],
)
def test_config_validation(fields, match):
    with pytest.raises(ValueError, match=match):
        DLLMCacheConfig(**fields)
    assert DLLMCacheConfig(transfer_ratio=None).adaptive is False


def test_cache_reused_across_prompts_without_reset(model, prompts):
    x = torch.cat([prompts(1, 10), torch.full((1, 6), MASK)], 1)
    with apply_dllm_cache(model, DLLMCacheConfig(10, 5, 0.25)) as handle:
        handle.cache.reset(10)
        model(x)
        other = x.clone()
        other[0, 0] = 5 if x[0, 0] != 5 else 6
        with pytest.raises(ValueError, match="prompt differs"):
            model(other)
        with pytest.raises(ValueError, match="cache holds features of 1 sequences of 16 tokens"):
            model(torch.cat([x, x], 1)[:, :20])
        handle.cache.reset(16)
        with pytest.raises(ValueError, match=r"prompt_length=16 must be in \[1, 15\]"):
            model(x)
        with pytest.raises(ValueError, match="prompt_length must be an int >= 1"):
            handle.cache.reset(0)


def test_cache_from_another_model_and_double_apply(make_model, prompts):
    a, b = make_model(), make_model(seed=1)
    with apply_dllm_cache(a) as handle:
        with pytest.raises(ValueError, match="not installed on this model"):
            generate(b, prompts(1, 6), **KW, cache=handle.cache)
        with pytest.raises(ValueError, match="already applied"):
            apply_dllm_cache(a)
    with pytest.raises(TypeError, match="config must be a DLLMCacheConfig"):
        apply_dllm_cache(a, {"prompt_interval": 5})


def test_model_without_adapter_modules_lists_what_is_missing():
    class NotATransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(2, 2)

    with pytest.raises(
        ValueError, match=r"llada: lacks model\.transformer\.blocks.*available adapters"
    ):
        apply_dllm_cache(NotATransformer())
    with pytest.raises(
        ValueError, match=r"lacks the modules the 'llama' adapter needs: model\.layers"
    ):
        apply_dllm_cache(NotATransformer(), adapter="llama")
    with pytest.raises(ValueError, match="unknown adapter 'gpt2'"):
        apply_dllm_cache(NotATransformer(), adapter="gpt2")


def test_llada_block_missing_a_submodule(make_model):
    model = make_model()
    for block in model.model.transformer["blocks"]:
        del block.up_proj
    with pytest.raises(ValueError, match=r"model\.transformer\.blocks\[i\]\.up_proj"):
        apply_dllm_cache(model, adapter="llada")


def test_bf16_similarity_is_computed_in_fp32():
    g = torch.Generator().manual_seed(0)
    new = torch.randn(2, 32, 16, generator=g)
    old = new + 0.05 * torch.randn(2, 32, 16, generator=g)
    picked = select_rows(new.bfloat16(), old.bfloat16(), 8)
    reference = select_rows(new.bfloat16().float(), old.bfloat16().float(), 8)
    assert torch.equal(picked, reference)


def test_tiny_config_rejects_mask_equal_to_pad():
    with pytest.raises(ValueError, match="mask_token_id and pad_token_id must differ"):
        TinyLLaDAConfig(mask_token_id=0, pad_token_id=0)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda m, x: dream_generate(m, x, mask_id=MASK, max_new_tokens=4, steps=4, top_p=1.5),
         r"top_p must be in \(0, 1\] or None, got 1.5"),
        (lambda m, x: dream_generate(m, x, mask_id=MASK, max_new_tokens=4, steps=4, top_k=0),
         "top_k must be an int >= 1 or None, got 0"),
        (lambda m, x: select_rows(torch.randn(1, 4, 8), torch.randn(1, 4, 8), 1, "query"),
         "selection must be one of .*got 'query'"),
        (lambda m, x: num_transfer_tokens(torch.ones(1, dtype=torch.long), 0),
         "steps must be an int >= 1, got 0"),
        (lambda m, x: generation_flops(LLADA_8B, 32, 10, 8, 0, None), "steps must be an int >= 1, got 0"),
        (lambda m, x: generation_flops(LLADA_8B, 32, -1, 8, 8, None),
         "prompt_length must be an int >= 1, got -1"),
        (lambda m, x: schedule(8, 0, DLLMCacheConfig()), "n_layers must be an int >= 1, got 0"),
    ],
)  # fmt: skip
def test_public_helpers_name_the_bad_value(model, prompts, call, match):
    with pytest.raises(ValueError, match=match):
        call(model, prompts(1, 8))


@pytest.mark.parametrize(
    "batch, prompt_length, match",
    [(2, 4, r"\(2, 12, 8\), but the input needs \(2, 12, 6\)"),
     (1, 6, r"\(1, 12, 6\), but the input needs \(2, 12, 6\)")],
)  # fmt: skip
def test_cached_block_rejects_tables_for_another_prompt_or_batch(
    model, batch, prompt_length, match
):
    from dllm_cache import cached_block, full_block, row_tables

    block = model.model.transformer["blocks"][0]
    parts = block.parts()
    h = torch.randn(2, 12, 32)
    sin, cos = block.rotary_emb.get_rotary_embedding(12, h.device)
    cos, sin = cos[:, 0], sin[:, 0]
    with torch.no_grad():
        _, cache = full_block(parts, h, cos, sin, None)
        ok = cached_block(parts, h, cos, sin, None, cache, 6, True, False, DLLMCacheConfig(),
                          tables=row_tables(cos, sin, 2, 6))  # fmt: skip
        assert ok[0].shape == h.shape
        with pytest.raises(ValueError, match=match):
            cached_block(parts, h, cos, sin, None, cache, 6, True, False, DLLMCacheConfig(),
                         tables=row_tables(cos, sin, batch, prompt_length))  # fmt: skip
