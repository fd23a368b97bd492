"""The special-token guard works on the compiled mask: no grammar can emit a control token."""

import pytest

pytest.importorskip("llguidance")

from cars_sampling import CARSSampler, ToyLM
from cars_sampling.llguidance_backend import LLGuidanceConstraint

SPECIALS = ["<|pad|>", "<|eos|>", "<|bos|>", "<|mask|>", "<|unk|>"]


@pytest.fixture(scope="module")
def tok():
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    t = Tokenizer(models.BPE(unk_token="<|unk|>"))
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=290,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    t.train_from_iterator(["say please, say hello"] * 20, trainer=trainer)
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=t,
        pad_token="<|pad|>",
        eos_token="<|eos|>",
        bos_token="<|bos|>",
        mask_token="<|mask|>",
        unk_token="<|unk|>",
        clean_up_tokenization_spaces=False,
    )


def special_ids(tok):
    return {tok.convert_tokens_to_ids(s) for s in SPECIALS} - {tok.eos_token_id}


@pytest.mark.parametrize("grammar", ["start: <[*]>+", "start: <[^5-20]>+", 'start: "a" <[*]>'])
def test_token_wildcards_never_allow_special_tokens(tok, grammar):
    c = LLGuidanceConstraint.from_grammar(grammar, tok)
    banned = sorted(special_ids(tok))
    assert len(banned) == 4 and c.special_token_ids == set(banned)
    c.reset()
    if grammar.startswith('start: "a"'):
        assert c.advance(tok("a", add_special_tokens=False)["input_ids"][0])
    mask = c.allowed_mask()
    assert not mask[banned].any(), "a special token passed the compiled mask"
    assert mask.sum() > 0  # ordinary tokens are still allowed
    for t in banned:
        c.reset()
        assert not c.advance(t)


def test_sampling_through_a_wildcard_grammar_emits_no_special_token(tok):
    c = LLGuidanceConstraint.from_grammar("start: <[*]> <[*]>", tok)
    lm = ToyLM(len(tok), tok.eos_token_id, seed=0, sharpness=0.5, eos_bias=6.0)
    res = CARSSampler(lm, c, max_new_tokens=2, seed=0).sample(n_samples=30, max_attempts=3000)
    assert res.n_valid == 30
    assert not {t for s in res.token_ids for t in s} & special_ids(tok)


def test_a_literal_that_spells_a_special_token_is_not_refused(tok):
    # 0.1 refused this grammar by scanning its text. It compiles now; llguidance's canonical
    # tokenization of forced text maps the literal onto the special id, which the guard removes,
    # so llguidance cannot sample it (README: Deviations). The DFA backend spells it in text tokens.
    c = LLGuidanceConstraint.from_grammar('start: "say <|pad|> please"', tok)
    c.reset()
    assert not c.allowed_mask()[sorted(special_ids(tok))].any()
    from cars_sampling import DFAConstraint

    dfa = DFAConstraint.from_regex(r"say <\|pad\|> please", tok)
    lm = ToyLM(len(tok), tok.eos_token_id, seed=1, sharpness=0.5, eos_bias=3.0)
    res = CARSSampler(lm, dfa, tokenizer=tok, max_new_tokens=20, seed=0).sample(
        n_samples=2, max_attempts=3000
    )
    assert res.n_valid == 2
    assert res.texts == ["say <|pad|> please"] * 2
    assert not {t for s in res.token_ids for t in s} & special_ids(tok)


def test_opting_in_allows_special_tokens(tok):
    c = LLGuidanceConstraint.from_grammar("start: <[*]>", tok, allow_special_tokens=True)
    c.reset()
    assert c.allowed_mask()[sorted(special_ids(tok))].all()
