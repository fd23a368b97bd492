"""Issue 27 §5 and §6: named presets, the official names, return value, bad input, Fast-dLLM's
parallel decoding and batch invariance."""

import pytest
import torch
from dllm_cache import (
    PRESETS,
    DLLMCacheConfig,
    apply_dllm_cache,
    commit_parallel,
    dLLMCacheConfig,
    generate,
    llada_generate,
)

MASK = 3
KW = dict(mask_id=MASK, gen_length=8, block_length=8, steps=8)


def test_presets_are_named():
    p = PRESETS["llada-instruct-longbench-hotpotqa"]
    assert (p.gen_length, p.steps, p.block_length) == (32, 32, 32)
    assert (p.config.prompt_interval, p.config.response_interval) == (100, 8)
    assert p.generate_kwargs() == {"gen_length": 32, "steps": 32, "block_length": 32}
    dream = PRESETS["dream-base-gsm8k-cot"].generate_kwargs()
    assert dream == {"max_new_tokens": 256, "steps": 256, "temperature": 0.2, "top_p": 0.95,
                     "alg": "entropy"}  # fmt: skip


def test_official_config_names_order_and_minus_one():
    c = dLLMCacheConfig(100, 7, 0.25)
    assert c == DLLMCacheConfig(prompt_interval=100, response_interval=7, transfer_ratio=0.25)
    assert dLLMCacheConfig() == DLLMCacheConfig(1, 1, 0.0)  # the official defaults
    # -1: the official `(t - 1) % -1 == 0` holds on every step
    assert dLLMCacheConfig(prompt_interval_steps=50, gen_interval_steps=-1).response_interval == 1
    with pytest.raises(ValueError, match="gen_interval_steps must be an int >= 1 or -1"):
        dLLMCacheConfig(gen_interval_steps=0)


def test_llada_signature_and_full_sequence(model, prompts):
    x = prompts(2, 10)
    response = generate(model, x, **KW)
    full = generate(model, x, **KW, return_full_sequence=True)
    assert (
        full.shape == (2, 18)
        and torch.equal(full[:, :10], x)
        and torch.equal(full[:, 10:], response)
    )
    # LLaDA's positional order: (model, prompt, steps, gen_length, block_length, temperature,
    # cfg_scale, remasking, mask_id) and its whole-sequence return
    assert torch.equal(llada_generate(model, x, 8, 8, 8, 0.0, 0.0, "low_confidence", MASK), full)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(temperature=float("nan")), "temperature must be a number >= 0, got nan"),
        (dict(temperature=float("inf")), "temperature must be finite"),
        (dict(cfg_scale=-1.0), "cfg_scale must be a number >= 0"),
        (dict(mask_id=48), r"mask_id=48 is outside the model's vocabulary \[0, 48\)"),
        (dict(mask_id=-1), "outside the model's vocabulary"),
        (dict(threshold=0.9, factor=1.0), "not both"),
        (dict(threshold=1.5), "threshold must be a confidence in"),
        (dict(factor=0.0), "factor must be a number > 0"),
    ],
)
def test_bad_input_is_named(model, prompts, kwargs, match):
    with pytest.raises(ValueError, match=match):
        generate(model, prompts(1, 6), **{**KW, **kwargs})


def test_prompt_ids_outside_the_vocabulary(model):
    with pytest.raises(ValueError, match="outside the model's vocabulary"):
        generate(model, torch.tensor([[5, 60, 7]]), **KW)


def test_reset_with_a_wrong_prompt_length_raises(model, prompts):
    x = torch.cat([prompts(1, 20), torch.full((1, 8), MASK)], 1)
    with apply_dllm_cache(model, DLLMCacheConfig(10, 5, 0.25)) as handle:
        handle.cache.reset(10, mask_id=MASK)
        with pytest.raises(ValueError, match=r"reset\(prompt_length=10\).*first mask .* \[20\]"):
            model(x)
        handle.cache.reset(20, mask_id=MASK)
        model(x)  # the right length passes


def _fast_dllm_factor(conf, masked, factor):
    """Fast-dLLM's get_transfer_index_dynamic, one row, written from its loop."""
    n_mask = int(masked.sum())
    threshs = [1 - factor / (n + 1) for n in range(1, n_mask + 1)]
    threshs[0] = -1
    sorted_conf = torch.sort(conf[masked], descending=True)[0]
    top_i = 0
    for top_i in range(len(threshs)):
        if sorted_conf[top_i] < threshs[top_i]:
            break
    if top_i == 0 or top_i == len(threshs) - 1:
        top_i += 1
    return set(torch.topk(conf, top_i).indices.tolist())


def test_commit_parallel_rules_match_fast_dllm():
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        conf = torch.rand(1, 12, generator=g, dtype=torch.float64) ** 0.3
        masked = torch.rand(1, 12, generator=g) < 0.7
        masked[0, 0] = True
        conf = torch.where(masked, conf, -torch.inf)
        for factor in (0.5, 1.0, 2.0):
            got = commit_parallel(conf, masked, None, factor)[0].nonzero().flatten().tolist()
            assert set(got) == _fast_dllm_factor(conf[0], masked[0], factor)
        got = commit_parallel(conf, masked, 0.9, None)[0]
        above = (conf[0] >= 0.9) & masked[0]
        assert torch.equal(got, above) if above.any() else int(got.sum()) == 1


def test_threshold_decoding(model, prompts):
    x = prompts(2, 12)
    kw = dict(mask_id=MASK, gen_length=16, block_length=8, steps=16)
    # a threshold no confidence reaches commits one token per step: LLaDA's steps = gen_length
    assert torch.equal(generate(model, x, **kw, threshold=1.0), generate(model, x, **kw))
    calls = []
    hook = model.register_forward_pre_hook(lambda m, a: calls.append(1))
    try:
        low = generate(model, x, **kw, threshold=0.0)  # everything at once, block by block
    finally:
        hook.remove()
    assert len(calls) == 2 and not (low == MASK).any()
    with apply_dllm_cache(model, DLLMCacheConfig(100, 4, 0.25)) as handle:
        both = generate(model, x, **kw, threshold=0.3, cache=handle.cache)
    assert not (both == MASK).any()


@pytest.mark.parametrize("config", [None, DLLMCacheConfig(6, 3, 0.25), DLLMCacheConfig(1, 1, 0.0)])
def test_greedy_outputs_are_batch_invariant_fp32(config, make_model, prompts):
    # batch 1 against batch 4, left-padded prompts of four lengths, with and without the cache
    model = make_model(seed=2)
    lengths = [21, 9, 16, 13]
    rows = [prompts(1, n, seed=10 + i) for i, n in enumerate(lengths)]
    P = max(lengths)
    batch = torch.zeros(4, P, dtype=torch.long)
    mask = torch.zeros(4, P, dtype=torch.long)
    for i, r in enumerate(rows):
        batch[i, P - r.shape[1] :], mask[i, P - r.shape[1] :] = r, 1
    kw = dict(mask_id=MASK, gen_length=16, block_length=8, steps=16)

    def run(ids, attention_mask=None):
        if config is None:
            return generate(model, ids, attention_mask, **kw)
        with apply_dllm_cache(model, config) as handle:
            return generate(model, ids, attention_mask, **kw, cache=handle.cache)

    together = run(batch, mask)
    for i, r in enumerate(rows):
        assert torch.equal(together[i], run(r)[0]), f"row {i}"
    if config is None:
        # tokens are identical; the fp32 logits are not bit-identical (different reduction
        # shapes), only close: the README says "token-identical, logits within ~1e-6"
        masks = torch.full((4, 16), MASK)
        with torch.no_grad():
            padded = model(
                torch.cat([batch, masks], 1), torch.cat([mask, torch.ones_like(masks)], 1)
            ).logits
            for i, r in enumerate(rows):
                alone = model(torch.cat([r, masks[:1]], 1)).logits
                torch.testing.assert_close(padded[i, P:], alone[0, -16:], rtol=0, atol=1e-5)
