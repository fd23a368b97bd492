"""The llguidance backend, checked against the pure-Python regex backend (a peer oracle)."""

import json

import pytest
import torch

pytest.importorskip("llguidance")

from cars_sampling import CARSSampler, DFAConstraint, GrammarError, ToyLM
from cars_sampling.llguidance_backend import LLGuidanceConstraint


def walk(constraint, tokenizer, text):
    constraint.reset()
    for t in tokenizer(text, add_special_tokens=False)["input_ids"]:
        assert constraint.advance(t)


@pytest.mark.parametrize("pattern", ["(ab|c)+( a)?", "[a-f]{1,3}x", "[ab]+(,[ab])*"])
def test_masks_agree_with_the_pure_python_regex_backend(small_tokenizer, pattern):
    # Patterns without forced text: there llguidance also allows non-canonical tokenizations.
    llg = LLGuidanceConstraint.from_regex(pattern, small_tokenizer)
    dfa = DFAConstraint.from_regex(pattern, small_tokenizer)
    for prefix in ["", "a", "ab", "c", "ab,", "ab,b"]:
        dfa.reset()
        ids = small_tokenizer(prefix, add_special_tokens=False)["input_ids"]
        if not all(dfa.advance(t) for t in ids):
            continue
        walk(llg, small_tokenizer, prefix)
        assert torch.equal(llg.allowed_mask(), dfa.allowed_mask()), prefix
        assert llg.is_accepting() == dfa.is_accepting()


def test_json_schema_samples_are_valid_json(small_tokenizer):
    schema = {
        "type": "object",
        "properties": {
            "name": {"enum": ["ab", "c"]},
            "age": {"type": "integer", "minimum": 0, "maximum": 9},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    c = LLGuidanceConstraint.from_json_schema(schema, small_tokenizer)
    lm = ToyLM(len(small_tokenizer), small_tokenizer.eos_token_id, seed=0, sharpness=0.5)
    res = CARSSampler(lm, c, tokenizer=small_tokenizer, max_new_tokens=30, seed=0).sample(
        n_samples=3, max_attempts=1000
    )
    assert res.n_valid == 3
    for text in res.texts:
        doc = json.loads(text)
        assert set(doc) == {"name", "age"} and isinstance(doc["age"], int)


def test_lark_grammar_and_invalid_tokens(small_tokenizer):
    c = LLGuidanceConstraint.from_grammar(
        'start: "(" OP " x " ATOM ")"\nOP: "bvand" | "bvor"\nATOM: "x" | "#x0f"', small_tokenizer
    )
    walk(c, small_tokenizer, "(bvand x #x0f)")
    assert c.is_accepting()
    assert c.advance(small_tokenizer.eos_token_id)
    c.reset()
    bad = small_tokenizer("z", add_special_tokens=False)["input_ids"][0]
    assert not c.advance(bad)
    c.reset()  # a rejected token must not poison later attempts
    walk(c, small_tokenizer, "(bvor x x)")


def test_advance_agrees_with_the_mask_on_forced_text(small_tokenizer):
    c = LLGuidanceConstraint.from_regex(r"SELECT [ab] FROM t;", small_tokenizer)
    for tok in range(len(small_tokenizer)):
        c.reset()
        allowed = bool(c.allowed_mask()[tok])
        c.reset()
        assert c.advance(tok) == allowed, tok


def test_bad_grammars_raise_grammar_error(small_tokenizer):
    with pytest.raises(GrammarError, match="does not compile"):
        LLGuidanceConstraint.from_grammar("start: foo(", small_tokenizer)
    with pytest.raises(GrammarError, match=r"invalid JSON schema|does not compile"):
        LLGuidanceConstraint.from_json_schema('{"type": "nonsense"}', small_tokenizer)


def test_json_schema_uses_the_standard_layout_and_passes_options(small_tokenizer):
    schema = {"type": "object", "properties": {"a": {"enum": [1]}, "b": {"enum": [2]}}}
    schema |= {"required": ["a", "b"], "additionalProperties": False}
    for kwargs, text in [({}, '{"a": 1, "b": 2}'), ({"separators": (",", ":")}, '{"a":1,"b":2}')]:
        c = LLGuidanceConstraint.from_json_schema(schema, small_tokenizer, **kwargs)
        lm = ToyLM(len(small_tokenizer), small_tokenizer.eos_token_id, seed=0, sharpness=0.5)
        res = CARSSampler(lm, c, tokenizer=small_tokenizer, max_new_tokens=30, seed=0).sample(
            n_samples=1, max_attempts=2000
        )
        assert res.texts == [text]
    with pytest.raises(ValueError, match="unknown JSON options"):
        LLGuidanceConstraint.from_json_schema(schema, small_tokenizer, json_options={"sep": 1})


def test_default_stop_tokens_come_from_the_generation_config(small_tokenizer, tmp_path):
    transformers = pytest.importorskip("transformers")
    small_tokenizer.save_pretrained(tmp_path)
    transformers.GenerationConfig(eos_token_id=[1, 5]).save_pretrained(tmp_path)
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path)
    c = LLGuidanceConstraint.from_regex("[ab]+", tok)
    assert c.eos_token_ids == {1, 5}
