"""The transformers adapter: KV-cache reuse is invisible in the results, errors are clear."""

import pytest
import torch

transformers = pytest.importorskip("transformers")

from cars_sampling import CARSSampler, DFAConstraint  # noqa: E402
from cars_sampling.transformers_lm import TransformersLM, sequence_logprob  # noqa: E402

V = 12
EOS = 1
TEXTS = [None, None, "a", "b", "c", "ab", "ba", "ca", "cc", " ", "b ", "a c"]


@pytest.fixture(scope="module")
def model():
    config = transformers.LlamaConfig(
        vocab_size=V,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def constraint():
    return DFAConstraint.from_regex("(ab|c)+( a)?", TEXTS, EOS, vocab_size=V)


def test_kv_reuse_matches_recomputation_on_every_prefix(model):
    reuse, fresh = TransformersLM(model), TransformersLM(model, reuse_kv=False)
    prefixes = [[0], [0, 2], [0, 2, 3], [0, 4], [0, 2, 3, 4], [0, 4, 4, 2], [0, 2, 5]]
    for p in prefixes:
        assert torch.allclose(reuse.logprobs(p), fresh.logprobs(p), atol=1e-5), p
    assert reuse.tokens_computed < fresh.tokens_computed


@pytest.mark.parametrize("style", ["cars", "rs"])
def test_kv_reuse_gives_the_same_samples(model, style):
    runs = []
    for reuse in (True, False):
        lm = TransformersLM(model, reuse_kv=reuse)
        s = CARSSampler(lm, constraint(), style=style, max_new_tokens=8, seed=4)
        res = s.sample([0], n_samples=6, max_attempts=400)
        runs.append((res.token_ids, res.acceptance_history, lm.tokens_computed))
    assert runs[0][:2] == runs[1][:2]
    assert runs[0][2] < runs[1][2], "reuse must compute fewer token positions"


def test_raw_logprobs_equal_one_teacher_forced_forward(model):
    lm = TransformersLM(model)
    res = CARSSampler(lm, constraint(), max_new_tokens=8, seed=1).sample([0, 3], n_samples=5)
    assert res.n_valid == 5
    for tokens, lp in zip(res.token_ids, res.raw_logprobs, strict=True):
        seq = [*tokens, EOS] if len(tokens) < 8 else tokens
        assert lp == pytest.approx(sequence_logprob(lm, [0, 3], seq), abs=1e-4)


def test_model_is_wrapped_automatically_and_batches_are_refused(model):
    s = CARSSampler(model, constraint(), max_new_tokens=8, seed=0)
    assert isinstance(s.lm, TransformersLM)
    with pytest.raises(ValueError, match="batch size above one"):
        s.sample(torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="batch size above one"):
        s.sample([[0, 1], [0, 2]])


def test_vocabulary_mismatch_is_an_error(model):
    class BigTokenizer:
        bos_token_id = None

        def __len__(self):
            return V + 5

    with pytest.raises(ValueError, match="vocabulary mismatch"):
        TransformersLM(model, BigTokenizer())
    small = DFAConstraint.from_regex("a+", TEXTS[:10], EOS)
    with pytest.raises(ValueError, match="vocabulary mismatch"):
        CARSSampler(model, small)


def test_padded_logit_rows_get_zero_probability(model):
    class SmallTokenizer:
        bos_token_id = None

        def __len__(self):
            return V - 2

    lm = TransformersLM(model, SmallTokenizer())
    lp = lm.logprobs([0, 2])
    assert lp.shape == (V,) and torch.isinf(lp[-2:]).all()
    assert torch.exp(lp).sum() == pytest.approx(1.0, abs=1e-5)


def test_logits_processor_makes_the_samplers_choices(model):
    """Driven with the sampler's uniforms, the processor reproduces CARSSampler token for token."""
    import numpy as np
    from cars_sampling import invariant_error
    from cars_sampling.processor import CARSLogitsProcessor
    from cars_sampling.trie import draw

    n, prompt = 6, [0]
    lm = TransformersLM(model)
    expected = CARSSampler(lm, constraint(), max_new_tokens=n, seed=7).sample(
        prompt, n_samples=1000, max_attempts=30
    )
    proc = CARSLogitsProcessor(constraint())
    rng = np.random.default_rng(7)
    got, history = [], []
    for _ in range(30):
        proc.begin(len(prompt))
        ids = list(prompt)
        while True:
            out = proc(torch.tensor([ids]), lm.logprobs(ids)[None])
            if proc.attempt_failed:
                break
            tok = draw(torch.exp(out[0].double()), float(rng.random()))
            ids.append(tok)
            if tok == EOS or len(ids) - len(prompt) == n:
                break
        ok = proc.finish(ids)
        history.append(ok)
        if ok:
            got.append([t for t in ids[len(prompt) :] if t != EOS])
        assert invariant_error(proc.trie) < 1e-12
    assert history == expected.acceptance_history
    assert got == expected.token_ids


def test_logits_processor_runs_inside_generate(model):
    from cars_sampling.processor import CARSLogitsProcessor, generate_kwargs

    c = constraint()
    proc = CARSLogitsProcessor(c)
    prompt = torch.tensor([[0]])
    torch.manual_seed(0)
    for _ in range(6):
        proc.begin(prompt.shape[1])
        out = model.generate(prompt, logits_processor=[proc], **generate_kwargs(4, [EOS]))
        if proc.finish(out):
            c.reset()
            assert all(c.advance(t) for t in out[0, 1:].tolist())
    assert proc.attempts == 6 and proc.trie.n_nodes > 1


def test_logits_processor_is_a_drop_in_without_begin_or_finish(model):
    """Plain ``generate(logits_processor=[proc])`` calls: each new call closes the last attempt."""
    from cars_sampling.processor import CARSLogitsProcessor, generate_kwargs

    proc = CARSLogitsProcessor(constraint())
    torch.manual_seed(0)
    for prompt in ([[0]], [[0]], [[0, 2]], [[0]]):
        model.generate(torch.tensor(prompt), logits_processor=[proc], **generate_kwargs(4, [EOS]))
    proc.begin(1)  # closes the fourth attempt
    assert proc.attempts == 4 and proc.n_tries == 2


def test_an_attempt_that_raises_inside_generate_still_counts(model):
    from cars_sampling.processor import CARSLogitsProcessor

    class Broken:
        generation_config = model.generation_config

        def generate(self, input_ids, logits_processor, **kwargs):
            proc = logits_processor[0]
            proc(input_ids, model(input_ids).logits[:, -1])
            raise KeyboardInterrupt

    proc = CARSLogitsProcessor(constraint())
    with pytest.raises(KeyboardInterrupt):
        proc.generate(Broken(), torch.tensor([[0]]), max_new_tokens=4)
    assert proc.attempts == 1 and proc.trie.n_nodes == 1


def test_stop_token_ids_collects_every_source(model):
    from cars_sampling.transformers_lm import stop_token_ids

    class Tok:
        eos_token_id = 7

    saved = model.generation_config.eos_token_id
    model.generation_config.eos_token_id = [1, 11]
    try:
        assert stop_token_ids(model, Tok()) == sorted({1, 11, 7, model.config.eos_token_id})
    finally:  # the model is shared by the module's tests
        model.generation_config.eos_token_id = saved


def test_batched_generate_runs_one_trie_per_row(model):
    from cars_sampling.processor import CARSLogitsProcessor

    c = constraint()
    proc = CARSLogitsProcessor(c)
    prompts = torch.tensor([[0, 2], [0, 3], [0, 2]])
    model.generation_config.repetition_penalty = 1.3  # a shipped option that generate() must reset
    torch.manual_seed(0)
    n_valid = 0
    try:
        for _ in range(4):
            out, valid = proc.generate(model, prompts, max_new_tokens=6)
            assert len(valid) == 3
            for row, ok in zip(out.tolist(), valid, strict=True):
                if ok:
                    n_valid += 1
                    c.reset()
                    gen = [t for t in row[2:] if t != EOS]
                    assert all(c.advance(t) for t in gen) and c.is_accepting()
    finally:
        model.generation_config.repetition_penalty = 1.0
    assert proc.n_tries == 3  # rows 0 and 2 share a prompt but not a trie
    assert proc.attempts == 12 and n_valid > 0
    with pytest.raises(ValueError, match="repetition_penalty"):
        proc.generate(model, prompts, max_new_tokens=6, repetition_penalty=1.2)


def test_padding_must_be_left_with_an_attention_mask(model):
    from cars_sampling.processor import CARSLogitsProcessor

    proc = CARSLogitsProcessor(constraint())
    right = torch.tensor([[0, 2, EOS], [0, 3, 4]])  # row 0 right-padded with the pad id (EOS)
    with pytest.raises(ValueError, match="pad token"):
        proc.generate(model, right, max_new_tokens=3)
    with pytest.raises(ValueError, match="only left padding"):
        proc.generate(model, right, max_new_tokens=3, attention_mask=torch.tensor([[1, 1, 0]] * 2))
    left, mask = torch.tensor([[EOS, 0, 2], [0, 3, 4]]), torch.tensor([[0, 1, 1], [1, 1, 1]])
    torch.manual_seed(0)
    proc.generate(model, left, max_new_tokens=3, attention_mask=mask)
    # Row 0's trie is keyed by its unpadded ids and holds the unpadded prompt's distribution.
    unpadded = TransformersLM(model, reuse_kv=False).logprobs([0, 2])
    assert torch.allclose(proc.trie.root.logp, unpadded, atol=1e-4)
    proc.generate(model, torch.tensor([[0, 2]]), max_new_tokens=3)
    assert proc.n_tries == 2  # the unpadded prompt found the padded row's trie


@pytest.mark.slow
def test_local_model_benchmark_runs_on_a_model_with_a_chat_template(tmp_path, small_tokenizer):
    """transformers 5 returns a BatchEncoding from apply_chat_template: the script copes."""
    import importlib.util
    from pathlib import Path

    from cars_sampling.transformers_lm import chat_prompt_ids

    tok = small_tokenizer
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    assert chat_prompt_ids(tok, "ab") == tok("ab", add_special_tokens=False)["input_ids"]
    config = transformers.LlamaConfig(
        vocab_size=len(tok),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        intermediate_size=32,
        eos_token_id=tok.eos_token_id,
    )
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "cars_local_model.py"
    spec = importlib.util.spec_from_file_location("cars_local_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    args = ["--model", str(tmp_path), "--styles", "cars", "--n-samples", "1"]
    out = module.main([*args, "--max-attempts", "3", "--max-new-tokens", "4"])
    assert out["cars"]["attempts"] >= 1
    tok.chat_template = None
