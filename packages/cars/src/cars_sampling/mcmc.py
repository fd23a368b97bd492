"""The MCMC baselines of the paper's comparison: Metropolis-Hastings with GCD proposals.

Gonzalez et al. (2025, arXiv 2506.05754) start a chain at a greedy-constrained-decoding (GCD)
sample and run a few Metropolis-Hastings steps towards ``P(w | w ∈ L)``; the official CARS code
runs them with 10 steps per sample and raw LM log-probs. A step picks a position ``i`` of the
current string ``s`` (``"prefix"``: uniform over its ``|s|`` drawn tokens, the stop token
included; ``"restart"``: always 0, an independence sampler), keeps ``s[:i]`` and redraws the rest
with GCD. GCD proposes a suffix with probability ``P(suffix) / W``, where ``W`` is the product of
the allowed masses along it, so the acceptance ratio is

    min(1, |s| / |s'| · W(s'[i:]) / W(s[i:]))     (the length factor only for "prefix").

The chain's stationary law is exact; a finite chain started at GCD is not, which is the paper's
point of comparison. The paper's third proposal ("priority") is not reconstructed here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from cars_sampling.baselines import GCDRun, gcd_continue
from cars_sampling.constraints import Constraint
from cars_sampling.lm import NextTokenLM
from cars_sampling.sampler import (
    SampleResult,
    checked_run_args,
)
from cars_sampling.tempering import check_sampling_args

Proposal = Literal["prefix", "restart"]
PROPOSALS: tuple[str, ...] = ("prefix", "restart")


def _log_accept(current: GCDRun, proposed: GCDRun, i: int, proposal: Proposal) -> float:
    """log of the Metropolis-Hastings ratio of ``proposed`` (continued from ``current[:i]``)."""
    log_ratio = sum(proposed.log_z[i:]) - sum(current.log_z[i:])
    if proposal == "prefix":  # the position is drawn uniformly over each string's positions
        log_ratio += math.log(len(current.log_z)) - math.log(len(proposed.log_z))
    return min(0.0, log_ratio)


def mcmc_sample(
    lm: NextTokenLM,
    constraint: Constraint,
    *,
    prompt: Sequence[int] | str = (),
    n_samples: int = 1,
    steps: int = 10,
    proposal: Proposal = "prefix",
    max_new_tokens: int = 512,
    temperature: float = 1.0,
    seed: int | None = None,
    tokenizer: Any = None,
    max_attempts: int | None = None,
    prefix_cache: bool = True,
) -> SampleResult:
    """``n_samples`` independent chains of ``steps`` Metropolis-Hastings steps from a GCD sample.

    Approximate: each sample is a chain's last state. ``n_attempts`` counts GCD runs (starts and
    proposals, ``max_attempts`` bounds them: a chain the bound cuts short is returned with the
    steps it ran), ``n_forward_passes`` the LM calls they made, and
    ``acceptance_history`` the MH acceptances. ``prefix_cache=False`` calls the LM's
    ``new_attempt()`` before each GCD run, as a fresh ``generate`` call per proposal would.
    """
    check_sampling_args(temperature, None, None, False)
    if proposal not in PROPOSALS:
        raise ValueError(f"proposal must be one of {PROPOSALS}, got {proposal!r}")
    if not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be an int >= 0, got {steps!r}")
    ids = checked_run_args(
        lm, constraint, prompt, tokenizer, n_samples, max_new_tokens, max_attempts
    )
    rng = np.random.default_rng(seed)
    budget = (steps + 1) * n_samples * 10 if max_attempts is None else max_attempts
    runs = passes = 0
    fresh = getattr(lm, "new_attempt", None)

    def run(prefix: Sequence[int], room: int) -> GCDRun:
        nonlocal runs, passes
        if not prefix_cache and fresh is not None:
            fresh()
        out = gcd_continue(lm, constraint, ids, prefix, rng, temperature, room)
        runs, passes = runs + 1, passes + out.passes
        return out

    samples: list[GCDRun] = []
    accepted: list[bool] = []
    while len(samples) < n_samples and runs < budget:
        state = run((), max_new_tokens)
        if not state.ok:
            continue  # a dead end: the chain has no valid start yet
        for _ in range(steps):
            if runs >= budget:
                break
            i = 0 if proposal == "restart" else int(rng.integers(len(state.log_z)))
            new = run(state.tokens[:i], max_new_tokens - i)
            new.log_p[:0] = state.log_p[:i]  # the kept prefix's positions, for a whole string
            new.log_z[:0] = state.log_z[:i]
            ok = new.ok and math.log(float(rng.random()) or 1e-300) < _log_accept(
                state, new, i, proposal
            )
            accepted.append(ok)
            state = new if ok else state
        samples.append(state)
    decode = tokenizer.decode if tokenizer is not None else getattr(constraint, "decode", None)
    tokens = [s.tokens for s in samples]
    return SampleResult(
        token_ids=tokens,
        texts=[str(decode(t)) if decode else " ".join(map(str, t)) for t in tokens],
        raw_logprobs=[s.logprob for s in samples],
        n_attempts=runs,
        n_forward_passes=passes,
        n_lm_calls=passes,
        exhausted=len(samples) < n_samples,
        reason="" if len(samples) == n_samples else f"{runs} GCD runs reached max_attempts",
        acceptance_history=accepted,
    )
