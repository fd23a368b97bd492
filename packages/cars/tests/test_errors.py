"""Spec section 8: bad input gives a clear error naming the value and what was expected."""

import pytest
import torch
from cars_sampling import CARSSampler, DFAConstraint, ToyLM, gcd_sample

from .conftest import EOS, VOCAB


@pytest.mark.parametrize("temperature", [0, -1.0, float("nan"), float("inf")])
def test_temperature_must_be_positive(toy, temperature):
    lm, c, _ = toy
    with pytest.raises(ValueError, match="temperature"):
        CARSSampler(lm, c, temperature=temperature)
    with pytest.raises(ValueError, match="temperature"):
        gcd_sample(lm, c, temperature=temperature)


@pytest.mark.parametrize("kwargs", [{"top_k": 2}, {"top_p": 0.9}])
def test_truncation_needs_an_explicit_opt_in(toy, kwargs):
    lm, c, n = toy
    with pytest.raises(ValueError, match="allow_truncation=True"):
        CARSSampler(lm, c, **kwargs)
    sampler = CARSSampler(lm, c, max_new_tokens=n, allow_truncation=True, seed=0, **kwargs)
    res = sampler.sample(n_samples=5, max_attempts=500)
    assert res.n_valid == 5


def test_top_k_changes_the_target_to_the_truncated_model(toy):
    from cars_sampling.tempering import transform_logprobs

    logp = torch.log_softmax(torch.tensor([3.0, 2.0, 1.0, 0.0]), 0)
    out = transform_logprobs(logp, top_k=2)
    assert torch.isinf(out[2:]).all()
    assert torch.exp(out).sum() == pytest.approx(1.0)
    out = transform_logprobs(logp, top_p=0.5)
    assert torch.isfinite(out).sum() == 1


def test_bad_style_and_sizes(toy):
    lm, c, _ = toy
    with pytest.raises(ValueError, match="style"):
        CARSSampler(lm, c, style="mcmc")
    with pytest.raises(ValueError, match="max_new_tokens"):
        CARSSampler(lm, c, max_new_tokens=0)
    with pytest.raises(ValueError, match="max_trie_bytes"):
        CARSSampler(lm, c, max_trie_bytes=0)
    sampler = CARSSampler(lm, c)
    with pytest.raises(ValueError, match="n_samples"):
        sampler.sample(n_samples=0)
    with pytest.raises(ValueError, match="max_attempts"):
        sampler.sample(max_attempts=0)


def test_vocabulary_mismatch_between_lm_and_constraint():
    lm = ToyLM(5, 4)
    c = DFAConstraint.from_regex("a+", VOCAB, EOS)
    with pytest.raises(ValueError, match=r"vocabulary mismatch.*5 logits.*4 token ids"):
        CARSSampler(lm, c)


def test_lm_returning_the_wrong_shape_is_caught(toy):
    _, c, _ = toy

    class Broken:
        vocab_size = 4

        def logprobs(self, prefix_ids):
            return torch.zeros(3)

    with pytest.raises(ValueError, match=r"shape \(3,\).*expected \(4,\)"):
        CARSSampler(Broken(), c).sample()


def test_wrong_types_are_type_errors(toy):
    lm, c, _ = toy
    with pytest.raises(TypeError, match="NextTokenLM"):
        CARSSampler(object(), c)
    with pytest.raises(TypeError, match="Constraint protocol"):
        CARSSampler(lm, object())
    with pytest.raises(TypeError, match="needs a tokenizer"):
        CARSSampler(lm, c).sample("text prompt")


def test_special_tokens_are_never_part_of_a_dfa_language():
    c = DFAConstraint.from_regex(".*", ["a", "<|eos|>", None], 1)
    c.reset()
    assert c.allowed_mask().tolist() == [True, True, False]  # token 2 (special) never allowed
    assert not c.advance(2)
