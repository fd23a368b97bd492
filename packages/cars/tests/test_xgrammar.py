"""The XGrammar backend: masks against the pure-Python regex backend, CARS exact by enumeration."""

import json

import pytest
import torch

pytest.importorskip("xgrammar")

from cars_sampling import CARSSampler, DFAConstraint, GrammarError, ToyLM, exact_distribution
from cars_sampling.xgrammar_backend import XGrammarConstraint


def walk(constraint, tokenizer, text):
    constraint.reset()
    for t in tokenizer(text, add_special_tokens=False)["input_ids"]:
        assert constraint.advance(t)


@pytest.mark.parametrize("pattern", ["(ab|c)+( a)?", "[a-f]{1,3}x", "SELECT [ab] FROM t;"])
def test_masks_agree_with_the_pure_python_regex_backend(small_tokenizer, pattern):
    # Both backends allow every tokenization of a valid text, forced text included.
    xg = XGrammarConstraint.from_regex(pattern, small_tokenizer)
    dfa = DFAConstraint.from_regex(pattern, small_tokenizer)
    for prefix in ["", "a", "ab", "c", "abc ", "SELECT ", "SELECT b FR"]:
        dfa.reset()
        ids = small_tokenizer(prefix, add_special_tokens=False)["input_ids"]
        if not all(dfa.advance(t) for t in ids):
            continue
        walk(xg, small_tokenizer, prefix)
        assert torch.equal(xg.allowed_mask(), dfa.allowed_mask()), prefix
        assert xg.is_accepting() == dfa.is_accepting()


def test_cars_samples_the_enumerated_distribution(small_tokenizer, chi_square):
    grammar = 'root ::= "(" ("bvand" | "bvor") " " ("x" | "y" | "#x0f") ")"'
    c = XGrammarConstraint.from_grammar(grammar, small_tokenizer)
    lm = ToyLM(len(small_tokenizer), small_tokenizer.eos_token_id, seed=2, sharpness=0.5)
    exact = exact_distribution(lm, c, max_new_tokens=10)
    assert len(exact.probs) > 20  # many tokenizations of six texts
    sampler = CARSSampler(lm, c, max_new_tokens=10, seed=0)
    res = sampler.sample(n_samples=1500, max_attempts=20_000)
    assert res.n_valid == 1500
    assert chi_square(res.token_ids, exact) > 1e-3
    texts = {small_tokenizer.decode(t) for t in res.token_ids}
    assert texts <= {f"({op} {a})" for op in ("bvand", "bvor") for a in ("x", "y", "#x0f")}


def test_rejected_tokens_do_not_poison_the_matcher(small_tokenizer):
    c = XGrammarConstraint.from_grammar('root ::= "(" [a-c]+ ")"', small_tokenizer)
    bad = small_tokenizer("z", add_special_tokens=False)["input_ids"][0]
    assert not c.advance(bad) and not c.advance(bad)
    walk(c, small_tokenizer, "(abc)")
    assert c.is_accepting()
    assert c.allowed_mask().nonzero().flatten().tolist() == [small_tokenizer.eos_token_id]
    assert c.advance(small_tokenizer.eos_token_id) and not c.advance(bad)


def test_json_schema_layout_and_special_tokens(small_tokenizer):
    schema = {"type": "object", "properties": {"a": {"enum": [1]}, "b": {"enum": [2]}}}
    schema |= {"required": ["a", "b"], "additionalProperties": False}
    lm = ToyLM(len(small_tokenizer), small_tokenizer.eos_token_id, seed=0, sharpness=0.5)
    for kwargs, text in [({}, '{"a": 1, "b": 2}'), ({"separators": (",", ":")}, '{"a":1,"b":2}')]:
        c = XGrammarConstraint.from_json_schema(schema, small_tokenizer, **kwargs)
        res = CARSSampler(lm, c, tokenizer=small_tokenizer, max_new_tokens=30, seed=0).sample(
            n_samples=2, max_attempts=2000
        )
        assert res.texts == [text, text] and json.loads(text) == {"a": 1, "b": 2}
    pad = small_tokenizer.pad_token_id
    c = XGrammarConstraint.from_regex("[ab]+", small_tokenizer)
    assert not c.allowed_mask()[pad] and c.eos_token_ids == {small_tokenizer.eos_token_id}


def test_a_literal_that_spells_a_special_token_is_sampled_as_text(small_tokenizer):
    """As with the DFA and llguidance backends (test_special_tokens): text, never the special id."""
    tok, text = small_tokenizer, "say <|pad|> please"
    c = XGrammarConstraint.from_grammar(f'root ::= "{text}"', tok)
    lm = ToyLM(len(tok), tok.eos_token_id, seed=1, sharpness=0.5, eos_bias=3.0)
    res = CARSSampler(lm, c, tokenizer=tok, max_new_tokens=24, seed=0).sample(
        n_samples=2, max_attempts=3000
    )
    assert res.texts == [text, text]
    assert tok.pad_token_id not in {t for s in res.token_ids for t in s}


def test_bad_grammars_and_vocabularies_raise(small_tokenizer):
    with pytest.raises(GrammarError, match="does not compile"):
        XGrammarConstraint.from_grammar("root ::= (", small_tokenizer)
    with pytest.raises(ValueError, match="vocabulary mismatch"):
        XGrammarConstraint.from_regex("a", small_tokenizer, vocab_size=10)
    with pytest.raises(ValueError, match="eos_token_ids"):
        XGrammarConstraint.from_regex("a", small_tokenizer, eos_token_ids=[10_000])


def test_reproduce_xgrammar_section_smoke(tmp_path):
    from cars_sampling.reproduce import main

    from shared_core.report import Report

    assert main(["--smoke", "--only", "xgrammar", "--out", str(tmp_path)]) == 0
    report = Report.load(tmp_path)
    assert [c.name.split(" is exact")[0].split(" needs")[0] for c in report.claims] == [
        "XGrammar-backed CARS",
        "control: DFA-backed CARS",
        "XGrammar-backed ARS",
        "control: XGrammar-backed GCD is biased (the exactness criterion can fail here)",
        "XGrammar-backed CARS",
        "XGrammar-backed CARS accepts more often than XGrammar-backed ARS",
    ]
    (rows,) = report.tables.values()
    assert [r["run"] for r in rows] == ["xgrammar", "dfa", "xgrammar ars", "xgrammar gcd"]
    assert rows[0]["valid strings"] > 20 and rows[0]["TV"] < 0.5
