import pytest
from cars_sampling import CARSSampler, RegexDFA, ToyLM
from cars_sampling.grammars import GRAMMARS

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


def test_bv4_lark_and_regex_forms_agree_on_cars_samples(small_tokenizer):
    pytest.importorskip("llguidance")
    g = GRAMMARS["bv4"]
    dfa, llg = g.constraint(small_tokenizer), g.constraint(small_tokenizer, backend="llguidance")
    lm = ToyLM(len(small_tokenizer), small_tokenizer.eos_token_id, seed=2, sharpness=0.5)
    res = CARSSampler(lm, dfa, tokenizer=small_tokenizer, max_new_tokens=24, seed=0).sample(
        n_samples=5, max_attempts=2000
    )
    assert res.n_valid == 5
    for text in res.texts:
        assert RegexDFA(g.regex).fullmatch(text)
        llg.reset()
        ids = small_tokenizer(text, add_special_tokens=False)["input_ids"]
        assert all(llg.advance(t) for t in ids) and llg.is_accepting(), text
