"""Baselines in the sampler's API: greedy constrained decoding, rejection and ancestral sampling.

Greedy constrained decoding (GCD) is what outlines, xgrammar and llguidance do in ``generate``:
mask the disallowed tokens at every step and renormalise locally. Every sample is valid, but the
distribution is ``Π_t p(w_t | w_<t, allowed)``, not ``P(w | w ∈ L)``: it over-weights strings whose
prefixes lose much mass to invalid continuations. It is the negative control of the exactness tests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch

from cars_sampling.constraints import Constraint
from cars_sampling.lm import NextTokenLM
from cars_sampling.sampler import (
    CARSSampler,
    SampleResult,
    Style,
    checked_run_args,
)
from cars_sampling.tempering import check_logprobs, check_sampling_args, transform_logprobs
from cars_sampling.trie import draw, probs_from_logp


@dataclass
class GCDRun:
    """One masked-decoding continuation: the whole string, its log-probs and the masked masses.

    ``tokens`` holds the prefix and the continuation, without the stop token; per drawn position
    of the continuation (the stop token included), ``log_p`` is the model log-prob of the drawn
    token, ``log_z`` the log of the allowed mass (the GCD importance weight of a string is
    ``exp(sum(log_z))``) and ``entropy`` the entropy (nats) of the constrained next-token
    distribution GCD drew from (what the MCMC ``priority`` proposal weighs positions by; empty
    unless ``gcd_continue`` was asked for it with ``with_entropy=True``).
    """

    tokens: list[int]
    log_p: list[float]
    log_z: list[float]
    ok: bool
    passes: int
    entropy: list[float]

    @property
    def logprob(self) -> float:
        return float(sum(self.log_p))


def gcd_continue(
    lm: NextTokenLM,
    constraint: Constraint,
    prompt: Sequence[int],
    prefix: Sequence[int],
    rng: np.random.Generator,
    temperature: float,
    max_new_tokens: int,
    *,
    with_entropy: bool = False,
) -> GCDRun:
    """Greedy constrained decoding from ``prefix`` (one uniform per token): GCD's one attempt.

    The constraint is replayed through ``prefix``, which must be valid. ``ok`` is ``False`` on a
    dead end (the mask allows nothing) or when ``max_new_tokens`` cuts a string outside the
    language. ``with_entropy`` records each position's constrained entropy (a pass over the
    vocabulary only the MCMC ``priority`` proposal needs); it draws nothing, so the tokens are
    the same either way.
    """
    constraint.reset()
    tokens = [int(t) for t in prefix]
    if not all(constraint.advance(t) for t in tokens):
        raise ValueError(f"prefix {tokens[:20]} is not valid under the constraint")
    log_p: list[float] = []
    log_z: list[float] = []
    entropy: list[float] = []
    passes = 0
    while True:
        raw = lm.logprobs([*prompt, *tokens]).detach().cpu()
        check_logprobs(raw, tokens)
        logp = transform_logprobs(raw, temperature)
        passes += 1
        lse = float(torch.logsumexp(logp.to(torch.float64), 0))
        weights = probs_from_logp(logp, lse) * constraint.allowed_mask().to(torch.float64)
        tok = draw(weights, float(rng.random()))
        if tok < 0 or not constraint.advance(tok):
            return GCDRun(tokens, log_p, log_z, False, passes, entropy)
        log_p.append(float(logp[tok]) - lse)
        log_z.append(math.log(float(weights.sum())))
        if with_entropy:
            entropy.append(_entropy(weights))
        if tok in constraint.eos_token_ids:
            return GCDRun(tokens, log_p, log_z, True, passes, entropy)
        tokens.append(tok)
        if len(tokens) >= len(prefix) + max_new_tokens:
            return GCDRun(tokens, log_p, log_z, constraint.is_accepting(), passes, entropy)


def _entropy(weights: torch.Tensor) -> float:
    """Entropy (nats) of ``weights`` renormalised; 0 for a point mass, never negative."""
    q = weights[weights > 0] / weights.sum()
    return max(0.0, -float((q * q.log()).sum()))


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
    ids = checked_run_args(
        lm, constraint, prompt, tokenizer, n_samples, max_new_tokens, max_attempts
    )
    rng = np.random.default_rng(seed)
    max_attempts = 10 * n_samples if max_attempts is None else max_attempts
    out: list[list[int]] = []
    logprobs: list[float] = []
    history: list[bool] = []
    passes = 0
    while len(out) < n_samples and len(history) < max_attempts:
        step = gcd_continue(lm, constraint, ids, (), rng, temperature, max_new_tokens)
        passes += step.passes
        history.append(step.ok)
        if step.ok:
            out.append(step.tokens)
            logprobs.append(step.logprob)
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


METHODS: tuple[str, ...] = (
    "cars",
    "ars",
    "rsft",
    "rs",
    "gcd",
    "mcmc-prefix",
    "mcmc-priority",
    "mcmc-restart",
)
MCMC_STEPS = 10  # per sample, as the official code runs the MCMC baselines


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
    """One run of a sampler style (``cars``, ``ars``, ``rsft``, ``rs``), of GCD (``gcd``) or of an
    MCMC baseline (``mcmc-prefix``, ``mcmc-priority``, ``mcmc-restart``: 10 steps per sample),
    with a fresh sampler: the common entry point of the reproduction and the benchmarks.
    ``prefix_cache=False`` runs the LM at every step of every attempt (the paper's regime)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method.startswith("mcmc-"):
        from cars_sampling.mcmc import mcmc_sample  # mcmc builds on this module's GCD

        return mcmc_sample(
            lm,
            constraint,
            prompt=prompt,
            n_samples=n_samples,
            steps=MCMC_STEPS,
            proposal=cast(Any, method.removeprefix("mcmc-")),
            max_new_tokens=max_new_tokens,
            seed=seed,
            tokenizer=tokenizer,
            max_attempts=max_attempts,
            prefix_cache=prefix_cache,
        )
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
