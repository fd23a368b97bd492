"""Sampler invariants (spec §6) and the Gumbel-max draw."""

import pytest
import torch
from dllm_cache import (
    DLLMCacheConfig,
    apply_dllm_cache,
    generate,
    gumbel_argmax,
    num_transfer_tokens,
)
from dllm_cache.sampler import _guided_logits
from torch import nn

MASK = 3


class Recorder(nn.Module):
    """Wraps a model and keeps every input it was called with."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.config = inner.config
        self.calls = []

    def forward(self, input_ids, attention_mask=None, logits_to_keep=0):
        self.calls.append(input_ids.clone())
        return self.inner(input_ids, attention_mask=attention_mask, logits_to_keep=logits_to_keep)


def test_transfer_schedule_sums_to_the_masks_and_is_front_loaded():
    counts = num_transfer_tokens(torch.tensor([10, 7, 3, 0]), 4)
    assert counts.tolist() == [[3, 3, 2, 2], [2, 2, 2, 1], [1, 1, 1, 0], [0, 0, 0, 0]]
    assert counts.sum(1).tolist() == [10, 7, 3, 0]


@pytest.mark.parametrize("remasking", ["low_confidence", "random"])
@pytest.mark.parametrize(
    ("R", "Bk", "S", "temperature"), [(16, 8, 16, 0.0), (12, 4, 6, 1.0), (8, 8, 3, 0.5)]
)
def test_sampler_invariants(model, prompts, remasking, R, Bk, S, temperature):
    rec = Recorder(model)
    P = 10
    out = generate(
        rec, prompts(2, P), mask_id=MASK, gen_length=R, block_length=Bk, steps=S,
        temperature=temperature, remasking=remasking, generator=torch.Generator().manual_seed(0),
    )  # fmt: skip
    assert not (out == MASK).any()
    states = [c[:, P:] for c in rec.calls] + [out]
    assert len(rec.calls) == S
    per_block = S // (R // Bk)
    for i in range(S):
        before, after = states[i], states[i + 1]
        was_committed = before != MASK
        assert torch.equal(after[was_committed], before[was_committed])  # never re-masked
        new = (before == MASK) & (after != MASK)
        block = i // per_block
        outside = torch.ones(R, dtype=torch.bool)
        outside[block * Bk : (block + 1) * Bk] = False
        assert not new[:, outside].any()  # nothing committed outside the current block
        expected = num_transfer_tokens(torch.tensor([Bk]), per_block)[0, i % per_block]
        assert new.sum(1).tolist() == [int(expected)] * 2


def test_temperature_zero_is_deterministic_and_seeds_reproduce(model, prompts):
    x = prompts(2, 10)
    kw = dict(mask_id=MASK, gen_length=8, block_length=4, steps=8)
    assert torch.equal(generate(model, x, **kw), generate(model, x, **kw))
    draws = [
        generate(model, x, **kw, temperature=1.0, generator=torch.Generator().manual_seed(s))
        for s in (1, 1, 2)
    ]
    assert torch.equal(draws[0], draws[1])
    assert not torch.equal(draws[0], draws[2])


def test_gumbel_draw_matches_softmax_by_chi_square():
    stats = pytest.importorskip("scipy.stats")
    logits = torch.tensor([1.0, 0.0, -0.5, 2.0, 0.3])
    tau, n = 0.7, 40_000
    g = torch.Generator().manual_seed(0)
    draws = gumbel_argmax(logits.expand(n, -1), tau, g)
    observed = torch.bincount(draws, minlength=5).numpy()
    expected = torch.softmax(logits.double() / tau, -1).numpy() * n
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    # the test has power: the draw is not softmax(logits) at temperature 1
    wrong = torch.softmax(logits.double(), -1).numpy() * n
    assert stats.chisquare(observed, wrong).pvalue < 1e-6
    assert torch.equal(gumbel_argmax(logits.expand(3, -1), 0.0), torch.full((3,), 3))


def test_response_only_logits_change_nothing(model, prompts):
    x = prompts(2, 10)
    kw = dict(mask_id=MASK, gen_length=8, block_length=8, steps=8)
    assert torch.equal(
        generate(model, x, **kw), generate(model, x, **kw, response_logits_only=False)
    )


def test_cfg_uncached_matches_formula_and_cached_interval_one_agrees(model, prompts):
    x = prompts(2, 10)
    kw = dict(mask_id=MASK, gen_length=8, block_length=8, steps=8, cfg_scale=1.5)
    plain = generate(model, x, **kw)
    assert not torch.equal(plain, generate(model, x, **{**kw, "cfg_scale": 0.0}))
    # LLaDA's formula, from two separate forward calls: un + (w + 1)(cond - un)
    full = torch.cat([x, torch.full((2, 8), MASK)], 1)
    full[:, 12] = 20  # a partly decoded response
    un_x = full.clone()
    un_x[:, :10] = MASK

    def logits_of(z):
        return model(z).logits[:, -8:]

    cond, un = logits_of(full), logits_of(un_x)
    guided = _guided_logits(full, 10, 1, 1.5, MASK, None, logits_of)
    torch.testing.assert_close(guided, un + 2.5 * (cond - un), rtol=0, atol=1e-5)
    with apply_dllm_cache(model, DLLMCacheConfig(1, 1, 0.0, cfg_interval=1)) as handle:
        assert torch.equal(plain, generate(model, x, **kw, cache=handle.cache))
        uncond_steps = {r.step for r in handle.cache.stats.records if r.stream == "uncond"}
        assert uncond_steps == set(range(1, 9))


def test_cfg_residual_is_reused_between_refreshes(model, prompts):
    x = prompts(1, 10)
    kw = dict(mask_id=MASK, gen_length=16, block_length=16, steps=16, cfg_scale=1.0)
    with apply_dllm_cache(model, DLLMCacheConfig(1, 1, 0.0, cfg_interval=4)) as handle:
        generate(model, x, **kw, cache=handle.cache)
        uncond_calls = max(r.step for r in handle.cache.stats.records if r.stream == "uncond")
    # refreshed at t <= 5 and t in {9, 13}: 7 unconditional forward calls instead of 16
    assert uncond_calls == 7


class FixedLogits(nn.Module):
    """Response logits that do not depend on the input: row ``i`` puts ``prob[i]`` on ``token[i]``."""

    def __init__(self, tokens, probs, vocab=12):
        super().__init__()
        self.table = torch.full((len(tokens), vocab), -30.0)
        for i, (t, p) in enumerate(zip(tokens, probs, strict=True)):
            self.table[i, t] = 0.0
            self.table[i, t + 1] = float(torch.log(torch.tensor(1 / p - 1)))  # softmax -> p on t
        self.calls = []

    def forward(self, x, logits_to_keep=0):
        self.calls.append(x.clone())
        logits = torch.zeros(x.shape[0], x.shape[1], self.table.shape[1])
        logits[:, -self.table.shape[0] :] = self.table
        return type("Out", (), {"logits": logits})()


def _commit_order(model, R):
    """The step at which each response position was committed (one commit per step)."""
    steps = [len(model.calls) - 1] * R
    for t in range(1, len(model.calls)):
        for i in range(R):
            if model.calls[t][0, -R + i] != MASK and model.calls[t - 1][0, -R + i] == MASK:
                steps[i] = t - 1
    return steps


EOS, EOT = 9, 6


def test_logits_eos_inf_never_samples_eos():
    model = FixedLogits([EOS, 4, EOS, 5], [0.9, 0.6, 0.8, 0.7])
    kw = dict(mask_id=MASK, gen_length=4, block_length=4, steps=4, eos_token_id=EOS)
    assert generate(model, torch.tensor([[1, 2]]), **kw).tolist() == [[EOS, 4, EOS, 5]]
    # EOS gone, the runner-up (EOS + 1 in the table) comes out instead
    out = generate(model, torch.tensor([[1, 2]]), **kw, logits_eos_inf=True)
    assert out.tolist() == [[EOS + 1, 4, EOS + 1, 5]]


def test_confidence_eos_eot_inf_commits_eos_and_eot_last():
    tokens, probs = [EOS, 4, EOT, 5, EOS], [0.99, 0.6, 0.95, 0.7, 0.9]
    kw = dict(mask_id=MASK, gen_length=5, block_length=5, steps=5, eos_token_id=EOS)
    plain = FixedLogits(tokens, probs)
    generate(plain, torch.tensor([[1, 2]]), **kw)
    assert _commit_order(plain, 5) == [0, 4, 1, 3, 2]  # by confidence
    flagged = FixedLogits(tokens, probs)
    out = generate(
        flagged, torch.tensor([[1, 2]]), **kw, eot_token_id=EOT, confidence_eos_eot_inf=True
    )
    assert out.tolist() == [tokens]  # same tokens, other order
    order = _commit_order(flagged, 5)
    assert order[1] == 1 and order[3] == 0  # the real tokens first, by confidence
    assert sorted(order[i] for i in (0, 2, 4)) == [2, 3, 4]
    # without eot_token_id only EOS is held back
    eos_only = FixedLogits(tokens, probs)
    generate(eos_only, torch.tensor([[1, 2]]), **kw, confidence_eos_eot_inf=True)
    assert _commit_order(eos_only, 5)[2] == 0


def test_eos_flags_need_an_eos_id():
    with pytest.raises(ValueError, match="eos_token_id"):
        generate(FixedLogits([4], [0.9]), torch.tensor([[1]]), mask_id=MASK, gen_length=1,
                 block_length=1, steps=1, logits_eos_inf=True)  # fmt: skip
