"""Baselines in the sampler's API: greedy constrained decoding, rejection and ancestral sampling.

Greedy constrained decoding (GCD) is what outlines, xgrammar and llguidance do in ``generate``:
mask the disallowed tokens at every step and renormalise locally. Every sample is valid, but the
distribution is ``Π_t p(w_t | w_<t, allowed)``, not ``P(w | w ∈ L)``: it over-weights strings whose
prefixes lose much mass to invalid continuations. It is the negative control of the exactness tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import torch

from cars_sampling.constraints import Constraint
from cars_sampling.lm import NextTokenLM
from cars_sampling.sampler import CARSSampler, SampleResult, Style, prompt_ids
from cars_sampling.tempering import check_logprobs, check_sampling_args, transform_logprobs
from cars_sampling.trie import draw, probs_from_logp


def gcd_sample(
    lm: NextTokenLM,
    constraint: Constraint,
    *,
    prompt: Sequence[int] | str = (),
    n_samples: int = 1,
    max_new_tokens: int = 512,
    temperature: float = 1.0,
    seed: int | None = None,
    tokenizer: Any = None,
    max_attempts: int | None = None,
) -> SampleResult:
    """Greedy constrained decoding (masked ancestral sampling): valid but biased samples.

    An attempt fails only when the mask allows nothing (a dead end) or ``max_new_tokens`` cuts a
    string that is not in the language; ``n_forward_passes`` counts one LM call per token.
    """
    check_sampling_args(temperature, None, None, False)
    if lm.vocab_size != constraint.vocab_size:
        raise ValueError(
            f"vocabulary mismatch: LM {lm.vocab_size} vs constraint {constraint.vocab_size}"
        )
    ids = prompt_ids(prompt, tokenizer)
    rng = np.random.default_rng(seed)
    max_attempts = 10 * n_samples if max_attempts is None else max_attempts
    out: list[list[int]] = []
    logprobs: list[float] = []
    history: list[bool] = []
    passes = 0
    while len(out) < n_samples and len(history) < max_attempts:
        constraint.reset()
        tokens: list[int] = []
        lp_sum = 0.0
        ok = False
        while True:
            raw = lm.logprobs([*ids, *tokens]).detach().cpu()
            check_logprobs(raw, tokens)
            logp = transform_logprobs(raw, temperature)
            passes += 1
            lse = float(torch.logsumexp(logp.to(torch.float64), 0))
            weights = probs_from_logp(logp, lse) * constraint.allowed_mask().to(torch.float64)
            tok = draw(weights, float(rng.random()))
            if tok < 0 or not constraint.advance(tok):
                break
            lp_sum += float(logp[tok]) - lse
            if tok in constraint.eos_token_ids:
                ok = True
                break
            tokens.append(tok)
            if len(tokens) == max_new_tokens:
                ok = constraint.is_accepting()
                break
        history.append(ok)
        if ok:
            out.append(tokens)
            logprobs.append(lp_sum)
    decode = tokenizer.decode if tokenizer is not None else getattr(constraint, "decode", None)
    return SampleResult(
        token_ids=out,
        texts=[str(decode(t)) if decode else " ".join(map(str, t)) for t in out],
        raw_logprobs=logprobs,
        n_attempts=len(history),
        n_forward_passes=passes,
        n_lm_calls=passes,
        exhausted=len(out) < n_samples,
        reason="" if len(out) == n_samples else f"{len(history)} attempts ended in dead ends",
        acceptance_history=history,
    )


def rejection_sample(
    lm: NextTokenLM,
    constraint: Constraint,
    *,
    prompt: Sequence[int] | str = (),
    n_samples: int = 1,
    max_attempts: int = 2000,
    **sampler_kwargs: Any,
) -> SampleResult:
    """Plain rejection sampling (``CARSSampler(style="rs")``): exact, no learning."""
    sampler = CARSSampler(lm, constraint, style="rs", **sampler_kwargs)
    return sampler.sample(prompt, n_samples=n_samples, max_attempts=max_attempts)


METHODS: tuple[str, ...] = ("cars", "ars", "rsft", "rs", "gcd")


def sample_with(
    method: str,
    lm: NextTokenLM,
    constraint: Constraint,
    *,
    prompt: Sequence[int] | str = (),
    n_samples: int = 1,
    max_attempts: int = 2000,
    max_new_tokens: int = 512,
    seed: int | None = None,
    tokenizer: Any = None,
    prefix_cache: bool = True,
) -> SampleResult:
    """One run of a sampler style (``cars``, ``ars``, ``rsft``, ``rs``) or of GCD (``gcd``), with
    a fresh sampler: the common entry point of the reproduction and the benchmarks.
    ``prefix_cache=False`` runs the LM at every step of every attempt (the paper's regime)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method == "gcd":
        return gcd_sample(
            lm,
            constraint,
            prompt=prompt,
            n_samples=n_samples,
            max_new_tokens=max_new_tokens,
            seed=seed,
            tokenizer=tokenizer,
            max_attempts=max_attempts,
        )
    sampler = CARSSampler(
        lm,
        constraint,
        tokenizer=tokenizer,
        style=cast(Style, method),
        max_new_tokens=max_new_tokens,
        seed=seed,
        prefix_cache=prefix_cache,
    )
    return sampler.sample(prompt, n_samples=n_samples, max_attempts=max_attempts)


def ancestral_sample(
    lm: NextTokenLM,
    eos_token_ids: Sequence[int],
    *,
    n_samples: int,
    max_new_tokens: int,
    prompt: Sequence[int] = (),
    temperature: float = 1.0,
    seed: int | None = None,
) -> list[list[int]]:
    """Unconstrained ancestral sampling with the sampler's draw rule (one uniform per token)."""
    rng = np.random.default_rng(seed)
    eos = set(eos_token_ids)
    out = []
    for _ in range(n_samples):
        tokens: list[int] = []
        while len(tokens) < max_new_tokens:
            raw = lm.logprobs([*prompt, *tokens]).detach().cpu()
            check_logprobs(raw, tokens)
            logp = transform_logprobs(raw, temperature)
            lse = float(torch.logsumexp(logp.to(torch.float64), 0))
            tok = draw(probs_from_logp(logp, lse), float(rng.random()))
            if tok in eos:
                break
            tokens.append(tok)
        out.append(tokens)
    return out
