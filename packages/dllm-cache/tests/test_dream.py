"""Dream's sampler path (issue 27 §2): the logit shift, its schedule and remasking.

The oracle is a reference written here from Dream's ``diffusion_generate`` (``_sample``), run on
a toy whose logits are shifted one position as Dream's are (position ``i`` predicts ``i + 1``).
"""

import pytest
import torch
from dllm_cache import DLLMCacheConfig, apply_dllm_cache, dream_generate, generate
from torch import nn

MASK = 3


class ShiftedToy(nn.Module):
    """A TinyLLaDA whose logits at position ``i`` are the model's at ``i + 1``: Dream's layout."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.config = inner.config

    def forward(self, x, **kwargs):
        logits = self.inner(x).logits
        return type("Out", (), {"logits": torch.cat([logits[:, 1:], logits[:, -1:]], 1)})()


def _reference(model, x, steps, alg, eps=1e-3):
    """Dream's _sample at temperature 0 (top_p/top_k off, alg_temp 0), written from its code."""
    x = torch.cat([x, torch.full((x.shape[0], steps), MASK)], 1)
    timesteps = torch.linspace(1, eps, steps + 1)
    for i in range(steps):
        mask_index = x == MASK
        logits = model(x).logits
        logits = torch.cat([logits[:, :1], logits[:, :-1]], dim=1)
        mask_logits = logits[mask_index]
        t, s = timesteps[i], timesteps[i + 1]
        probs = torch.softmax(mask_logits, dim=-1)
        confidence, x0 = probs.max(dim=-1)
        if alg == "topk_margin":
            sorted_probs, _ = torch.sort(probs, dim=-1, descending=True)
            confidence = sorted_probs[:, 0] - sorted_probs[:, 1]
        elif alg == "entropy":
            confidence = torch.sum(probs * torch.log(probs + 1e-10), dim=-1)
        num_mask_token = mask_index.sum() / mask_index.shape[0]
        n = int(num_mask_token * (1 - s / t)) if i < steps - 1 else int(num_mask_token)
        full_confidence = torch.full_like(x, -torch.inf, dtype=logits.dtype)
        full_confidence[mask_index] = confidence
        if n > 0:
            _, transfer_index = torch.topk(full_confidence, n)
            x_ = torch.zeros_like(x) + MASK
            x_[mask_index] = x0.clone()
            row_indices = torch.arange(x.size(0)).unsqueeze(1).expand_as(transfer_index)
            x[row_indices, transfer_index] = x_[row_indices, transfer_index]
    return x


@pytest.mark.parametrize("alg", ["maskgit_plus", "topk_margin", "entropy"])
def test_dream_generate_equals_dreams_own_sampler(model, prompts, alg):
    toy = ShiftedToy(model)
    x = prompts(2, 10)
    ours = dream_generate(toy, x, mask_id=MASK, max_new_tokens=8, steps=8, alg=alg,
                          return_full_sequence=True)  # fmt: skip
    assert torch.equal(ours, _reference(toy, x, 8, alg))
    assert not (ours == MASK).any()


def test_dream_origin_draws_like_dream(model, prompts):
    toy, x = ShiftedToy(model), prompts(1, 10)
    ours = dream_generate(toy, x, mask_id=MASK, max_new_tokens=8, steps=4, alg="origin",
                          generator=torch.Generator().manual_seed(5))  # fmt: skip
    # the reference of 'origin' at temperature 0: the committed tokens are the shifted argmax,
    # the coin flips are Dream's (1 - s/t per step, all on the last), from the same seed
    torch.manual_seed(5)
    xr = torch.cat([x, torch.full((1, 8), MASK)], 1)
    grid = torch.linspace(1, 1e-3, 5)
    for i in range(4):
        masked = xr == MASK
        logits = toy(xr).logits
        logits = torch.cat([logits[:, :1], logits[:, :-1]], 1)[masked]
        p = 1 - grid[i + 1] / grid[i] if i < 3 else 1
        x0 = torch.zeros_like(xr[masked]) + MASK
        go = torch.rand(*x0.shape) < p
        x0[go] = logits[go].argmax(-1)
        xr[masked] = x0
    assert torch.equal(ours, xr[:, 10:])


def test_llada_sampler_applies_the_shift_for_dream_layouts(model, prompts):
    # the shifted toy under the shift equals the unshifted model without it; 0.1 read the
    # shifted logits as they come, one position off
    toy, x = ShiftedToy(model), prompts(2, 12)
    kw = dict(mask_id=MASK, gen_length=8, block_length=8, steps=8)
    expected = generate(model, x, **kw)
    assert torch.equal(generate(toy, x, **kw, shift_logits=True), expected)
    assert not torch.equal(generate(toy, x, **kw, shift_logits=False), expected)
    toy.config = type(model.config)(**{**model.config.to_dict(), "model_type": "Dream"})
    toy.config.model_type = "Dream"
    assert torch.equal(generate(toy, x, **kw), expected)  # the default reads model_type


def test_dream_generate_under_the_cache_identity(model, prompts):
    x = prompts(2, 10)
    kw = dict(mask_id=MASK, max_new_tokens=8, steps=8, alg="entropy")
    plain = dream_generate(model, x, **kw)
    with apply_dllm_cache(model, DLLMCacheConfig(1, 1, 0.25)) as handle:
        assert torch.equal(dream_generate(model, x, **kw, cache=handle.cache), plain)
    with apply_dllm_cache(model, DLLMCacheConfig(100, 4, 0.25)) as handle:
        cached = dream_generate(model, x, **kw, cache=handle.cache)
        assert handle.cache.stats.flops < handle.cache.stats.full_flops
    assert not (cached == MASK).any()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(alg="greedy"), "alg must be one of"),
        (dict(steps=0), "steps must be an int >= 1"),
        (dict(temperature=float("nan")), "temperature must be a finite number"),
    ],
)
def test_dream_generate_bad_input(model, prompts, kwargs, match):
    with pytest.raises(ValueError, match=match):
        dream_generate(model, prompts(1, 6), mask_id=MASK, **kwargs)
