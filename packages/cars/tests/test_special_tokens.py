"""The special-token guard works on the compiled mask: no grammar can emit a control token."""

import pytest

pytest.importorskip("llguidance")

from cars_sampling import CARSSampler, ToyLM
from cars_sampling.llguidance_backend import LLGuidanceConstraint

SPECIALS = ["<|pad|>", "<|eos|>", "<|bos|>", "<|mask|>", "<|unk|>"]
ADDED = "<|im_start|>"


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
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=t,
        pad_token="<|pad|>",
        eos_token="<|eos|>",
        bos_token="<|bos|>",
        mask_token="<|mask|>",
        unk_token="<|unk|>",
        clean_up_tokenization_spaces=False,
    )
    # An added token marked special but not in all_special_ids (chat markers such as Llama-3's
    # <|eot_id|>): both backends must treat it as special.
    from tokenizers import AddedToken

    tok.add_tokens([AddedToken(ADDED, special=True)])
    assert tok.convert_tokens_to_ids(ADDED) not in tok.all_special_ids
    return tok


def special_ids(tok):
    return {tok.convert_tokens_to_ids(s) for s in [*SPECIALS, ADDED]} - {tok.eos_token_id}


@pytest.mark.parametrize("grammar", ["start: <[*]>+", "start: <[^5-20]>+", 'start: "a" <[*]>'])
def test_token_wildcards_never_allow_special_tokens(tok, grammar):
    c = LLGuidanceConstraint.from_grammar(grammar, tok)
    banned = sorted(special_ids(tok))
    assert len(banned) == 5 and c.special_token_ids == set(banned)
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


def test_naming_or_forcing_a_special_token_is_refused_at_construction(tok):
    from cars_sampling import GrammarError

    with pytest.raises(GrammarError, match=r"unknown special token.*allow_special_tokens=True"):
        LLGuidanceConstraint.from_grammar('start: "a" <|pad|>', tok)
    pad = tok.pad_token_id
    with pytest.raises(GrammarError, match=rf"special token\(s\) \[{pad}\] \['<\|pad\|>'\]"):
        LLGuidanceConstraint.from_grammar(f"start: <[{pad}]>", tok)


@pytest.mark.parametrize("backend", ["dfa", "llguidance"])
@pytest.mark.parametrize("text", ["<|pad|>", ADDED])
def test_a_literal_that_spells_a_special_token_is_sampled_as_text(tok, backend, text):
    """Both backends (and XGrammar, in test_xgrammar) read such a literal as text: 0.2.0's
    llguidance backend compiled it, then raised GrammarError while sampling."""
    from cars_sampling import DFAConstraint

    if backend == "dfa":
        c = DFAConstraint.from_regex(f"say {text} please".replace("|", r"\|"), tok)
        for t in sorted(special_ids(tok)):  # the same set the llguidance backend bans
            assert c.vocab[t] is None
    else:
        c = LLGuidanceConstraint.from_grammar(f'start: "say {text} please"', tok)
    lm = ToyLM(len(tok), tok.eos_token_id, seed=1, sharpness=0.5, eos_bias=3.0)
    res = CARSSampler(lm, c, tokenizer=tok, max_new_tokens=20, seed=0).sample(
        n_samples=2, max_attempts=3000
    )
    assert res.n_valid == 2
    assert res.texts == [f"say {text} please"] * 2
    assert not {t for s in res.token_ids for t in s} & special_ids(tok)


def test_opting_in_allows_special_tokens(tok):
    LLGuidanceConstraint.from_grammar('start: "a" <|pad|>', tok, allow_special_tokens=True)
    c = LLGuidanceConstraint.from_grammar("start: <[*]>", tok, allow_special_tokens=True)
    c.reset()
    assert c.allowed_mask()[sorted(special_ids(tok))].all()
