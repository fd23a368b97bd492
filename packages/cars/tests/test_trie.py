"""Spec oracles on the trie: invariant, monotonicity, acceptance closed form, layouts, termination."""

import math

import pytest
import torch
from cars_sampling import (
    STYLES,
    CARSSampler,
    DFAConstraint,
    TrieMemoryError,
    accept_all,
    ancestral_sample,
    exact_distribution,
    invariant_error,
)
from cars_sampling.tempering import transform_logprobs

from .conftest import EOS, VOCAB


def proposal_mass(sampler, lm, exact, max_new_tokens):
    """Σ_{w ∈ L} Q(w) for the next attempt, computed by walking the trie with the style's rule."""
    theta_at = {
        "cars": lambda depth: True,
        "ars": lambda depth: True,
        "rsft": lambda depth: depth == 0,
        "rs": lambda depth: False,
    }[sampler.style]
    total = 0.0
    for w in exact.probs:
        seq = (*w, EOS) if len(w) < max_new_tokens else w
        node, q = sampler.trie.root, 1.0
        for depth, tok in enumerate(seq):
            if node is None:  # not in the trie yet: the attempt draws from the raw model
                p = torch.exp(transform_logprobs(lm.logprobs(list(seq[:depth]))).double())
                q *= float(p[tok] / p.sum())
                continue
            weights = node.weights() if theta_at(depth) else node.probs()
            q *= float(weights[tok] / weights.sum())
            node = node.children.get(tok)
        total += q
    return total


@pytest.mark.parametrize("sparse", [True, False])
@pytest.mark.parametrize("style", STYLES)
def test_invariant_monotone_and_acceptance_closed_form(sparse_toy, style, sparse):
    lm, c, n = sparse_toy
    exact = exact_distribution(lm, c, max_new_tokens=n)
    sampler = CARSSampler(lm, c, style=style, max_new_tokens=n, seed=5, sparse_trie=sparse)
    previous_theta: dict[int, torch.Tensor] = {}
    z_prev = math.inf
    for attempt in range(40):
        sampler.sample(n_samples=1, max_attempts=1)
        assert invariant_error(sampler.trie) < 1e-12, f"invariant broken after attempt {attempt}"
        z = sampler.z_root
        assert z <= z_prev + 1e-15
        z_prev = z
        for node in sampler.trie.nodes():
            # The LRU cache of sampling weights must track every θ update.
            assert torch.allclose(sampler.trie.weights(node), node.weights(), rtol=0, atol=1e-15)
            theta = node.theta_vector()
            if id(node) in previous_theta:
                assert (theta <= previous_theta[id(node)] + 1e-15).all()
            previous_theta[id(node)] = theta
        if attempt % 8 == 0:
            # The closed form P(accept next) = P(L) / Z_root, against an exact enumeration of Q.
            expected = exact.mass / z
            assert proposal_mass(sampler, lm, exact, n) == pytest.approx(expected, rel=1e-9)
    if style in ("ars", "cars"):
        assert sampler.z_root < 1.0, "learning styles must remove invalid mass"


def test_cars_acceptance_climbs_towards_one(sparse_toy):
    lm, c, n = sparse_toy
    exact = exact_distribution(lm, c, max_new_tokens=n)
    sampler = CARSSampler(lm, c, style="cars", max_new_tokens=n, seed=0)
    res = sampler.sample(n_samples=300, max_attempts=5000)
    assert res.n_valid == 300
    assert sampler.z_root == pytest.approx(exact.mass, rel=0.05)
    assert sum(res.acceptance_history[-100:]) >= 90


@pytest.mark.parametrize("style", STYLES)
def test_sparse_and_dense_tries_give_identical_samples(sparse_toy, style):
    lm, c, n = sparse_toy
    runs = []
    for sparse in (True, False):
        sampler = CARSSampler(lm, c, style=style, max_new_tokens=n, seed=42, sparse_trie=sparse)
        res = sampler.sample(n_samples=40, max_attempts=3000)
        runs.append((res.token_ids, res.acceptance_history, sampler.trie.n_nodes))
    assert runs[0] == runs[1]


def test_sparse_trie_uses_less_memory_per_node():
    lm_v = 512
    from cars_sampling import ToyLM

    lm = ToyLM(lm_v, 0, seed=0)
    vocab = [None] + [chr(97 + i % 26) * (1 + i // 26) for i in range(lm_v - 1)]
    c = DFAConstraint.from_regex("(ab|c)+", vocab, 0)
    sizes = {}
    for sparse in (True, False):
        s = CARSSampler(lm, c, style="cars", max_new_tokens=6, seed=0, sparse_trie=sparse)
        s.sample(n_samples=5, max_attempts=200)
        sizes[sparse] = s.stats.trie_bytes / s.stats.trie_nodes
    assert sizes[True] < 0.5 * sizes[False]


@pytest.mark.parametrize("style", STYLES)
def test_raw_logprobs_equal_teacher_forced_sum(toy, style):
    lm, c, n = toy
    res = CARSSampler(lm, c, style=style, max_new_tokens=n, seed=3).sample(
        n_samples=20, max_attempts=2000
    )
    for tokens, lp in zip(res.token_ids, res.raw_logprobs, strict=True):
        seq = [*tokens, EOS] if len(tokens) < n else tokens
        forced = sum(float(lm.logprobs(seq[:i])[t]) for i, t in enumerate(seq))
        assert lp == pytest.approx(forced, abs=1e-5)


@pytest.mark.parametrize("style", STYLES)
def test_accept_everything_reduces_to_ancestral_sampling(toy, style):
    lm, _, n = toy
    sampler = CARSSampler(lm, accept_all(4, EOS), style=style, max_new_tokens=n, seed=9)
    res = sampler.sample(n_samples=30)
    assert res.n_attempts == 30
    assert res.token_ids == ancestral_sample(lm, [EOS], n_samples=30, max_new_tokens=n, seed=9)


@pytest.mark.parametrize("style", ["cars", "ars", "rsft"])
def test_empty_language_ends_exhausted(toy, style):
    lm, _, n = toy
    empty = DFAConstraint.from_transitions({(0, 0): 1, (1, 1): 0}, 0, set(), 4, EOS)
    res = CARSSampler(lm, empty, style=style, max_new_tokens=n, seed=0).sample(
        n_samples=1, max_attempts=10_000
    )
    assert res.exhausted and res.n_valid == 0
    assert "exhausted" in res.reason and "max_new_tokens" in res.reason
    assert res.n_attempts < 10_000


def test_max_new_tokens_too_small_is_reported(toy):
    lm, _, _ = toy
    c = DFAConstraint.from_regex("abcabc", VOCAB, EOS)  # needs 6 tokens plus EOS
    res = CARSSampler(lm, c, style="cars", max_new_tokens=4, seed=0).sample(max_attempts=1000)
    assert res.exhausted and "max_new_tokens=4" in res.reason


def test_rs_on_empty_language_stops_at_max_attempts(toy):
    lm, _, n = toy
    empty = DFAConstraint.from_transitions({(0, 0): 1, (1, 1): 0}, 0, set(), 4, EOS)
    res = CARSSampler(lm, empty, style="rs", max_new_tokens=n, seed=0).sample(max_attempts=50)
    assert res.exhausted and res.n_attempts == 50 and "max_attempts=50" in res.reason


def test_trie_memory_limit_raises_clear_error(toy):
    lm, c, n = toy
    sampler = CARSSampler(lm, c, max_new_tokens=n, seed=0, max_trie_bytes=1000)
    with pytest.raises(TrieMemoryError, match="max_trie_bytes=1000"):
        sampler.sample(n_samples=50, max_attempts=500)


def test_new_prompt_or_grammar_resets_the_trie(toy):
    lm, c, n = toy
    sampler = CARSSampler(lm, c, max_new_tokens=n, seed=0)
    sampler.sample([0], n_samples=5)
    nodes = sampler.trie.n_nodes
    sampler.sample([0], n_samples=5)
    assert sampler.trie.n_nodes >= nodes, "the same prompt keeps its trie"
    sampler.sample([1], n_samples=1)
    assert sampler.stats.attempts <= 5 + 50, "a new prompt starts a new trie and new counters"
    before = sampler.trie
    sampler.constraint = DFAConstraint.from_regex("c+", VOCAB, EOS)
    sampler.sample([1], n_samples=1)
    assert sampler.trie is not before


@pytest.mark.parametrize("pattern", ["(ab|c)+a?", "[ab]*c", "a(bc|cb)*b?c", "(a|b|c){2,4}"])
@pytest.mark.parametrize("seed", [0, 1])
def test_closed_form_across_languages_and_models(pattern, seed):
    from cars_sampling import ToyLM

    lm = ToyLM(4, EOS, seed=seed, sharpness=2.0)
    c = DFAConstraint.from_regex(pattern, VOCAB, EOS)
    exact = exact_distribution(lm, c, max_new_tokens=5)
    for style in ("cars", "ars"):
        sampler = CARSSampler(lm, c, style=style, max_new_tokens=5, seed=seed)
        sampler.sample(n_samples=10**6, max_attempts=25)
        assert invariant_error(sampler.trie) < 1e-12
        expected = exact.mass / sampler.z_root
        assert proposal_mass(sampler, lm, exact, 5) == pytest.approx(expected, rel=1e-9)
