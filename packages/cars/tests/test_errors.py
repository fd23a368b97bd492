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


class _BrokenLM:
    """An LM that returns NaN (or all -inf) once the prefix reaches ``at`` generated tokens."""

    def __init__(self, value, at=1):
        self.vocab_size, self.value, self.at = 4, value, at

    def logprobs(self, prefix_ids):
        if len(prefix_ids) > self.at:
            return torch.full((4,), self.value)
        return torch.log(torch.full((4,), 0.25))


@pytest.mark.parametrize("value", [float("nan"), -float("inf")])
def test_a_broken_lm_raises_naming_the_prefix(toy, value):
    _, c, n = toy
    with pytest.raises(ValueError, match=r"prefix \[\d"):
        CARSSampler(_BrokenLM(value), c, max_new_tokens=n, seed=0).sample([0], n_samples=5)


def _sample_methods(lm, c):
    """CARS and the baselines, called as ``f(prompt=..., n_samples=..., max_new_tokens=...)``."""
    from cars_sampling.mcmc import mcmc_sample

    def cars(prompt=(), n_samples=1, max_new_tokens=6, max_attempts=50):
        sampler = CARSSampler(lm, c, max_new_tokens=max_new_tokens)
        return sampler.sample(prompt, n_samples=n_samples, max_attempts=max_attempts)

    def gcd(**kw):
        return gcd_sample(lm, c, **kw)

    def mcmc(**kw):
        return mcmc_sample(lm, c, steps=2, **kw)

    return {"cars": cars, "gcd": gcd, "mcmc": mcmc}


@pytest.mark.parametrize("method", ["cars", "gcd", "mcmc"])
def test_prompt_ids_outside_the_vocabulary_are_refused(toy, method):
    lm, c, _ = toy
    f = _sample_methods(lm, c)[method]
    with pytest.raises(ValueError, match=r"\[7\] are outside the LM's vocabulary \[0, 4\)"):
        f(prompt=[0, 7])
    with pytest.raises(ValueError, match="outside"):
        f(prompt=[-1])


@pytest.mark.parametrize("method", ["cars", "gcd", "mcmc"])
@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"max_new_tokens": -3}, "max_new_tokens"),
        ({"n_samples": 0}, "n_samples"),
        ({"n_samples": -2}, "n_samples"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"n_samples": 2.5}, "n_samples"),
    ],
)
def test_counts_and_lengths_must_be_positive_ints(toy, method, kwargs, name):
    lm, c, _ = toy
    with pytest.raises(ValueError, match=f"{name} must be an int >= 1, got {kwargs[name]!r}"):
        _sample_methods(lm, c)[method](**kwargs)


@pytest.mark.parametrize("sparse", [True, False])
def test_the_trie_memory_guard_is_honoured(sparse_toy, sparse):
    from cars_sampling import TrieMemoryError

    lm, c, n = sparse_toy
    limit = 3_000
    s = CARSSampler(lm, c, max_new_tokens=n, seed=0, sparse_trie=sparse, max_trie_bytes=limit)
    with pytest.raises(TrieMemoryError, match="max_trie_bytes=3000"):
        for _ in range(200):
            s.sample(n_samples=5, max_attempts=50)
            assert s.trie.nbytes <= limit
    assert s.trie.nbytes <= limit


def test_a_cone_cannot_push_the_trie_past_its_limit():
    from cars_sampling import Trie, TrieMemoryError
    from cars_sampling.trie import SparseNode

    logp = torch.log_softmax(torch.randn(1000), 0)
    limit = SparseNode(logp, 0).nbytes()  # room for the node, not for its cone mask
    trie = Trie(sparse=True, max_bytes=limit)
    try:
        root = trie.set_root(logp, born=0)
        trie.apply_cone(root, torch.rand(1000) > 0.5)
    except TrieMemoryError:
        pass
    assert trie.nbytes <= limit


class _PosInfLM:
    """A toy LM with one +inf log-prob: before 0.2.0 this read as "the language is exhausted"."""

    def __init__(self, lm):
        self.lm, self.vocab_size = lm, lm.vocab_size

    def logprobs(self, prefix_ids):
        x = self.lm.logprobs(prefix_ids).clone()
        x[2] = float("inf")
        return x


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_a_positive_infinite_log_prob_raises_naming_the_prefix(toy, temperature):
    from cars_sampling import exact_distribution, sample_with
    from cars_sampling.processor import CARSLogitsProcessor

    lm, c, n = toy
    bad = _PosInfLM(lm)
    with pytest.raises(ValueError, match=r"\+inf for token ids \[2\] after the generated prefix"):
        CARSSampler(bad, c, max_new_tokens=n, temperature=temperature, seed=0).sample([0])
    for style in ("ars", "rs", "gcd"):
        with pytest.raises(ValueError, match=r"\+inf"):
            sample_with(style, bad, c, prompt=[0], max_new_tokens=n, seed=0)
    with pytest.raises(ValueError, match=r"\+inf"):
        exact_distribution(bad, c, max_new_tokens=n, prompt=[0])
    proc = CARSLogitsProcessor(c, temperature=temperature)
    proc.begin(1)
    with pytest.raises(ValueError, match=r"\+inf for token ids \[2\]"):
        proc(torch.tensor([[0]]), bad.logprobs([0])[None])


def test_booleans_are_not_token_ids(toy):
    lm, c, n = toy
    with pytest.raises(ValueError, match="bool"):
        CARSSampler(lm, c, max_new_tokens=n).sample([True, 0])
