import pytest
import torch
from cars_sampling import DFAConstraint, PrefixPredicateConstraint, accept_all

from .conftest import EOS, VOCAB


def brute_mask(constraint, prefix):
    """Allowed tokens by trying each one: the definition the cached mask must reproduce."""
    out = []
    for tok in range(constraint.vocab_size):
        constraint.reset()
        ok = all(constraint.advance(t) for t in prefix) and constraint.advance(tok)
        # A non-EOS token is allowed iff the prefix stays completable.
        out.append(ok)
    return torch.tensor(out)


def test_regex_constraint_mask_matches_token_by_token_check():
    vocab = ["a", "b", "ab", "ca", "", "abc", None, "c"]
    c = DFAConstraint.from_regex("(ab|c)+a?", vocab, 6)
    for prefix in [(), (0,), (2,), (7, 0), (2, 3), (5,), (0, 1, 7)]:
        c.reset()
        assert all(c.advance(t) for t in prefix)
        assert torch.equal(c.allowed_mask(), brute_mask(c, prefix)), prefix


def test_eos_allowed_exactly_in_accepting_states(toy):
    _, c, _ = toy
    c.reset()
    assert not c.is_accepting() and not c.allowed_mask()[EOS]
    for t in (0, 1):  # "ab"
        assert c.advance(t)
    assert c.is_accepting() and c.allowed_mask()[EOS]
    assert c.advance(EOS)
    assert not c.advance(0), "nothing may follow EOS"
    c.reset()
    assert not c.advance(EOS), "the empty string is not in (ab|c)+a?"


def test_table_dfa_dead_states_are_masked():
    # 0 -a-> 1 -b-> 2 (accepting); 0 -c-> 3 where 3 can never accept.
    trans = {(0, 0): 1, (1, 1): 2, (0, 2): 3, (3, 2): 3}
    c = DFAConstraint.from_transitions(trans, 0, {2}, vocab_size=4, eos_token_ids=EOS)
    c.reset()
    assert c.allowed_mask().tolist() == [True, False, False, False]
    assert not c.advance(2)


def test_empty_language_masks_everything():
    c = DFAConstraint.from_transitions({(0, 0): 0}, 0, set(), vocab_size=4, eos_token_ids=EOS)
    c.reset()
    assert not c.allowed_mask().any()


def test_prefix_predicate_on_top_of_a_grammar():
    base = DFAConstraint.from_regex("[abc]+", VOCAB, EOS)
    # Semantic check: no two equal tokens in a row, and the string must end in "c".
    c = PrefixPredicateConstraint(
        lambda p: len(p) < 2 or p[-1] != p[-2], base=base, accept=lambda p: p[-1] == 2
    )
    c.reset()
    assert c.advance(0)
    assert c.allowed_mask().tolist() == [False, True, True, False]
    assert c.advance(2) and c.is_accepting()
    assert not c.advance(2)
    assert c.decode([0, 2]) == "ac"


def test_accept_all_allows_every_token_and_eos():
    c = accept_all(5, [3, 4])
    c.reset()
    assert c.allowed_mask().all()
    assert c.advance(1) and c.advance(4)


@pytest.mark.parametrize("eos", [[], [9], ["x"]])
def test_bad_eos_ids_are_refused(eos):
    with pytest.raises(ValueError, match="eos"):
        DFAConstraint.from_regex("a", VOCAB, eos)
