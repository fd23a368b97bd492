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


def test_a_literal_that_spells_a_special_token_raises_a_grammar_error(tok):
    # llguidance's canonical tokenization of forced text maps the literal onto the special id,
    # which the guard removes: the sampler must say so, not report an exhausted language.
    from cars_sampling import GrammarError

    with pytest.raises(GrammarError, match=r"special token\(s\) \[\d+\] \['<\|pad\|>'\]"):
        LLGuidanceConstraint.from_grammar('start: "<|pad|>"', tok)
    c = LLGuidanceConstraint.from_grammar('start: "say <|pad|> please"', tok)
    lm = ToyLM(len(tok), tok.eos_token_id, seed=1, sharpness=0.5, eos_bias=3.0)
    with pytest.raises(GrammarError, match="allow_special_tokens=True"):
        CARSSampler(lm, c, tokenizer=tok, max_new_tokens=20, seed=0).sample(max_attempts=3000)


@pytest.mark.parametrize("text", ["<|pad|>", ADDED])
def test_the_dfa_backend_spells_special_tokens_in_text_tokens(tok, text):
    from cars_sampling import DFAConstraint

    dfa = DFAConstraint.from_regex(f"say {text} please".replace("|", r"\|"), tok)
    dfa.reset()
    for t in sorted(special_ids(tok)):  # the same set the llguidance backend bans
        assert dfa.vocab[t] is None
    lm = ToyLM(len(tok), tok.eos_token_id, seed=1, sharpness=0.5, eos_bias=3.0)
    res = CARSSampler(lm, dfa, tokenizer=tok, max_new_tokens=20, seed=0).sample(
        n_samples=2, max_attempts=3000
    )
    assert res.n_valid == 2
    assert res.texts == [f"say {text} please"] * 2
    assert not {t for s in res.token_ids for t in s} & special_ids(tok)


def test_opting_in_allows_special_tokens(tok):
    c = LLGuidanceConstraint.from_grammar("start: <[*]>", tok, allow_special_tokens=True)
    c.reset()
    assert c.allowed_mask()[sorted(special_ids(tok))].all()
