import itertools
import re

import pytest
from cars_sampling import GrammarError, RegexDFA

PATTERNS = [
    "(ab|c)+a?",
    "a(bc|cb)*b?c",
    "[a-c]{2,3}",
    "(?:a|b)*c{1,}",
    "a.c",
    "[^a]b*",
    r"\d+(\.\d{1,2})?",
    "(a|)b",
    "x{0}y",
    r"\S\D",
    r"[\d.]+\W?",
]


def strings(alphabet, max_len):
    for n in range(max_len + 1):
        for chars in itertools.product(alphabet, repeat=n):
            yield "".join(chars)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_fullmatch_agrees_with_re_on_every_short_string(pattern):
    dfa = RegexDFA(pattern)
    alphabet = "abcxy1.9"
    for s in strings(alphabet, 4):
        assert dfa.fullmatch(s) == bool(re.fullmatch(pattern, s)), s


@pytest.mark.parametrize("pattern", ["(ab|c)+a?", "a(bc|cb)*b?c", "[a-c]{2,3}"])
def test_live_iff_some_extension_matches(pattern):
    dfa = RegexDFA(pattern)
    for prefix in strings("abc", 3):
        state = dfa.start
        for ch in prefix:
            state = dfa.step(state, ch)
        brute = any(re.fullmatch(pattern, prefix + tail) for tail in strings("abc", 4))
        assert dfa.live(state) == brute, prefix


@pytest.mark.parametrize("bad", ["(ab", "a{3,1}", "^ab", "a)", "[z-a]", "*a", "(?=a)"])
def test_bad_patterns_raise_grammar_error(bad):
    with pytest.raises(GrammarError, match="regex"):
        RegexDFA(bad)


@pytest.mark.parametrize("pattern", PATTERNS[:7])
def test_random_strings_are_members(pattern):
    import numpy as np
    from cars_sampling.regex import random_string

    rng = np.random.default_rng(0)
    for _ in range(50):
        assert re.fullmatch(pattern, random_string(pattern, rng))
