import numpy as np
import pytest
from cars_sampling import RegexDFA, ToyLM, gcd_sample
from cars_sampling.grammars import GRAMMARS
from cars_sampling.regex import random_string

VALID = {
    "bv4": [
        "x",
        "#x0f",
        "(bvnot y)",
        "(bvand (bvneg x) #xff)",
        "(bvadd (bvor x y) (bvshl x #x01))",
    ],
    "slia": [
        "name",
        '(str.++ name " ")',
        "(str.at name (str.len name))",
        '(str.++ (str.substr name 0 3) (str.replace name " " "."))',
    ],
    "json": [
        '{"name": "Ann", "age": 31}',
        '{"name": "Bo", "age": 7, "tags": ["a", "bc"]}',
        '{"name": "x", "age": 0, "tags": []}',
    ],
    "sql": ["SELECT * FROM users;", "SELECT id, age FROM orders WHERE age > 30 AND id = 4;"],
}
INVALID = {
    "bv4": ["(bvand x)", "(bvnot (bvnot (bvnot x)))", "z"],
    "slia": ["(str.++ name)", "nam"],
    "json": ['{"name": "Ann"}', '{"name": "", "age": 3}', '{"name": "A", "age": 3, "tags": [1]}'],
    "sql": ["SELECT FROM users;", "SELECT * FROM users WHERE id = 1234;"],
}


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_grammar_regex_accepts_and_rejects_hand_written_strings(name):
    dfa = RegexDFA(GRAMMARS[name].regex)
    assert all(dfa.fullmatch(s) for s in VALID[name])
    assert not any(dfa.fullmatch(s) for s in INVALID[name])


def _llg_accepts(llg, tokenizer, text):
    llg.reset()
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return all(llg.advance(t) for t in ids) and llg.is_accepting()


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_lark_and_regex_forms_agree(small_tokenizer, name):
    """Both directions: regex members (random and hand-written) are Lark members, CARS samples
    under the Lark form are regex members, and the hand-written non-members fail both."""
    pytest.importorskip("llguidance")
    g = GRAMMARS[name]
    assert g.lark is not None
    llg = g.constraint(small_tokenizer, backend="llguidance")
    rng = np.random.default_rng(0)
    for text in [*VALID[name], *(random_string(g.regex, rng) for _ in range(30))]:
        assert _llg_accepts(llg, small_tokenizer, text), text
    for text in INVALID[name]:
        assert not _llg_accepts(llg, small_tokenizer, text), text
    # Strings generated under the Lark form (masked decoding: cheap, and any member will do here).
    lm = ToyLM(len(small_tokenizer), small_tokenizer.eos_token_id, seed=2, sharpness=0.5)
    res = gcd_sample(lm, llg, n_samples=10, max_new_tokens=80, seed=0, tokenizer=small_tokenizer)
    assert res.n_valid == 10
    for text in res.texts:
        assert RegexDFA(g.regex).fullmatch(text), text
