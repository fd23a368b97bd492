"""The logits processor across prompts, LMs and batch rows: one trie per (prompt, LM, row)."""

import pytest
import torch
from cars_sampling import CARSSampler, ToyLM, exact_distribution
from cars_sampling.processor import (
    CARSLogitsProcessor,
    check_generate_options,
    generate_kwargs,
)
from cars_sampling.trie import draw

pytest.importorskip("scipy.stats")


def drive(proc, lm, prompt, n, rng):
    """One attempt of ``generate`` by hand: the processor's scores, drawn with ``rng``."""
    proc.begin(len(prompt))
    ids = list(prompt)
    while True:
        out = proc(torch.tensor([ids]), lm.logprobs(ids)[None])
        if proc.attempt_failed:
            break
        tok = draw(torch.exp(out[0].double()), float(rng.random()))
        ids.append(tok)
        if tok == lm.eos_token_id or len(ids) - len(prompt) == n:
            break
    ok = proc.finish(ids)
    return [t for t in ids[len(prompt) :] if t != lm.eos_token_id] if ok else None


def drive_drop_in(proc, lm, checker, n, rng):
    """One attempt as a bare ``generate(logits_processor=[proc])`` call: no begin, no finish."""
    ids = []
    while True:
        out = proc(torch.tensor([ids]), lm.logprobs(ids)[None])
        tok = draw(torch.exp(out[0].double()), float(rng.random()))
        ids.append(tok)
        if tok == lm.eos_token_id or len(ids) == n:
            break
    checker.reset()
    sample = ids[:-1] if ids[-1] == lm.eos_token_id else ids
    return sample if all(checker.advance(t) for t in sample) and checker.is_accepting() else None


class _UncountedProcessor(CARSLogitsProcessor):
    """0.2.0's behaviour: an attempt without finish() is dropped uncounted (its nodes stay new)."""

    def _close_unfinished(self):
        self._prompt_len, self._rows, self._seen = None, None, None


@pytest.mark.parametrize(
    "cls, exact_ok", [(CARSLogitsProcessor, True), (_UncountedProcessor, False)]
)
def test_forgetting_finish_does_not_bias_the_samples(toy, chi_square, cls, exact_ok):
    """The review's scenario (0.2.0: TV 0.166, p = 9e-35): attempts never finished are closed
    by the next call, so the samples stay exact; the 0.2.0 behaviour must fail the same test."""
    import copy

    import numpy as np

    lm, c, n = toy
    exact = exact_distribution(lm, c, max_new_tokens=n)
    proc, checker, rng = cls(c), copy.deepcopy(c), np.random.default_rng(0)
    got, attempts = [], 0
    while len(got) < 1000:
        sample = drive_drop_in(proc, lm, checker, n, rng)
        attempts += 1
        if sample is not None:
            got.append(sample)
    assert (chi_square(got, exact) > 1e-3) == exact_ok
    if exact_ok:
        proc.begin(0)
        assert proc.attempts == attempts and proc.n_tries == 1


def test_alternating_prompts_sample_each_prompts_exact_distribution(toy, chi_square):
    import numpy as np

    lm, c, n = toy
    prompts = [(0,), (2, 1)]
    exact = {p: exact_distribution(lm, c, max_new_tokens=n, prompt=p) for p in prompts}
    proc, rng = CARSLogitsProcessor(c), np.random.default_rng(0)
    got = {p: [] for p in prompts}
    while min(len(v) for v in got.values()) < 600:
        for p in prompts:
            sample = drive(proc, lm, p, n, rng)
            if sample is not None and len(got[p]) < 600:
                got[p].append(sample)
    assert proc.n_tries == 2
    for p in prompts:
        assert chi_square(got[p], exact[p]) > 1e-3, p


def test_a_swapped_lm_or_temperature_starts_a_new_trie(toy):
    lm, c, n = toy
    other = ToyLM(4, lm.eos_token_id, seed=9)
    s = CARSSampler(lm, c, max_new_tokens=n, seed=0)
    s.sample([0], n_samples=20)
    s.lm = other
    s.sample([0], n_samples=1)
    assert torch.allclose(s.trie.root.logp, other.logprobs([0]))
    assert s.stats.accepted == 1
    s.temperature = 2.0
    s.sample([0], n_samples=1)
    assert s.stats.accepted == 1
    assert torch.allclose(s.trie.root.logp, torch.log_softmax(other.logprobs([0]) / 2.0, 0))


def test_processor_detects_a_changed_lm_from_the_root_scores(toy):
    import numpy as np

    lm, c, n = toy
    proc, rng = CARSLogitsProcessor(c), np.random.default_rng(1)
    for _ in range(5):
        drive(proc, lm, (0,), n, rng)
    other = ToyLM(4, lm.eos_token_id, seed=9)
    drive(proc, other, (0,), n, rng)
    assert torch.allclose(proc.trie.root.logp, other.logprobs([0]))
    assert proc.attempts == 1  # the stale trie's attempts are gone with it


def test_options_that_break_exactness_are_refused_or_reset():
    with pytest.raises(ValueError, match="repetition_penalty"):
        check_generate_options({"repetition_penalty": 1.2})
    with pytest.raises(ValueError, match="min_p"):
        check_generate_options({"min_p": 0.1})
    with pytest.raises(ValueError, match="do_sample"):
        check_generate_options({"do_sample": False})
    for key, value in [
        ("forced_eos_token_id", 1),
        ("exponential_decay_length_penalty", (2, 1.5)),
        ("watermarking_config", {"greenlist_ratio": 0.25}),
        ("num_beam_groups", 2),
    ]:
        with pytest.raises(ValueError, match=key):
            check_generate_options({key: value})
    check_generate_options({"top_k": None, "num_beam_groups": 1})  # transformers' defaults
    kw = generate_kwargs(8, [3])
    assert kw["repetition_penalty"] == 1.0 and kw["top_k"] == 0 and kw["min_p"] is None
    check_generate_options(kw)


def drive_batch(proc, lm, prompts, n, rng):
    """One batched ``generate`` attempt by hand: each row drawn from the processor's scores."""
    eos = lm.eos_token_id
    proc.begin(prompts)
    rows, done = [list(p) for p in prompts], [False] * len(prompts)
    for _ in range(n):
        out = proc(torch.tensor(rows), torch.stack([lm.logprobs(r) for r in rows]))
        for b, row in enumerate(rows):
            tok = eos if done[b] else draw(torch.exp(out[b].double()), float(rng.random()))
            row.append(tok)
            done[b] = done[b] or tok == eos
        if all(done):
            break
    valid = proc.finish(rows)
    return [
        [t for t in row[len(p) :] if t != eos] if ok else None
        for row, p, ok in zip(rows, prompts, valid, strict=True)
    ]


class _ConeMaskedProcessor(CARSLogitsProcessor):
    """The classic bug inside the processor: cone-masked draws at nodes new in this attempt."""

    def _scores(self, row):
        trie, node = row.run.trie, row.nodes[-1]
        if self.style == "cars" and node.born == row.run.attempts and len(row.nodes) > 1:
            trie.apply_cone(node, row.constraint.allowed_mask())
            row.pending = True
            return torch.log(trie.weights(node))
        return super()._scores(row)


@pytest.mark.parametrize(
    "cls, exact_ok", [(CARSLogitsProcessor, True), (_ConeMaskedProcessor, False)]
)
def test_batched_rows_sample_exactly_and_the_cone_mutant_fails(toy, chi_square, cls, exact_ok):
    """Batches of fresh rows (every row's first attempt, the mutant's weak spot), then persistent
    batches mixing two prompts: chi-square of each prompt's samples against its exact law."""
    import numpy as np

    lm, c, n = toy
    prompts = [(0,), (2,), (0,)]
    exact = {p: exact_distribution(lm, c, max_new_tokens=n, prompt=p) for p in set(prompts)}
    rng = np.random.default_rng(3)
    first = []
    while len(first) < 300:
        first += [s for s in drive_batch(cls(c), lm, [(0,)] * 8, n, rng) if s is not None]
    assert (chi_square(first, exact[(0,)]) > 1e-3) == exact_ok
    if not exact_ok:
        return
    proc, got = cls(c), {p: [] for p in exact}
    while min(len(v) for v in got.values()) < 300:
        for p, s in zip(prompts, drive_batch(proc, lm, prompts, n, rng), strict=True):
            if s is not None:
                got[p].append(s)
    assert proc.n_tries == 3
    for p, samples in got.items():
        assert chi_square(samples, exact[p]) > 1e-3, p
