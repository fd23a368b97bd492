"""The MCMC baselines of the paper's comparison: Metropolis-Hastings with GCD proposals.

Gonzalez et al. (2025, arXiv 2506.05754) start a chain at a greedy-constrained-decoding (GCD)
sample and run a few Metropolis-Hastings steps towards ``P(w | w ∈ L)``; the official CARS code
(``pparys/cars``, ``mcmc/``) runs them with 10 steps per sample and raw LM log-probs. A step draws
a position ``i`` of the current string ``s`` with probability ``ρ_i(s)``, keeps ``s[:i]`` and
redraws the rest with GCD, which proposes a suffix with probability ``q_i(s' | s) = P(s'[i:]) /
W(s'[i:])`` (``W``: the product of the allowed masses along it). The position laws, over the
``|s|`` drawn tokens, the stop token included:

- ``"prefix"``: uniform;
- ``"priority"``: ``∝ exp(H_i) − 1``, ``H_i`` the entropy of the constrained next-token
  distribution at position ``i`` (positions where the constraint forces the token are never
  redrawn);
- ``"restart"``: always 0 (an independence sampler).

As in the official code, the acceptance ratio uses the proposal's probability summed over every
position that could have produced it (any ``i`` up to the common prefix of ``s`` and ``s'``):

    min(1, P(s') q(s | s') / (P(s) q(s' | s))),   q(s' | s) = Σ_{i ≤ lcp(s, s')} ρ_i(s) q_i(s' | s).

The chain's stationary law is exact; a finite chain started at GCD is not, which is the paper's
point of comparison.
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
from cars_sampling.trie import draw

Proposal = Literal["prefix", "priority", "restart"]
PROPOSALS: tuple[str, ...] = ("prefix", "priority", "restart")


def position_weights(run: GCDRun, proposal: Proposal) -> np.ndarray:
    """Unnormalised ``ρ_i``: how a step picks the position to redraw from, one per drawn token."""
    n = len(run.log_z)
    if proposal == "restart":
        return np.eye(1, n).ravel()
    if proposal == "prefix":
        return np.ones(n)
    # expm1: exp(H) - 1 without cancellation for the near-forced positions (H close to 0)
    return np.expm1(np.asarray(run.entropy, dtype=np.float64))


def _log_propose(current: GCDRun, proposed: GCDRun, proposal: Proposal) -> float:
    """log q(proposed | current): the position law times GCD's suffix, summed over positions."""
    w = position_weights(current, proposal)
    pairs = zip(current.tokens, proposed.tokens, strict=False)
    common = next(
        (k for k, (a, b) in enumerate(pairs) if a != b),
        min(len(current.tokens), len(proposed.tokens)),
    )
    last = min(common, len(w) - 1)  # position `common` is where they differ (or a stop token)
    step = np.asarray(proposed.log_p, dtype=np.float64) - np.asarray(proposed.log_z)
    suffix = np.cumsum(step[::-1])[::-1]  # log q_i, the GCD probability of proposed[i:]
    with np.errstate(divide="ignore"):  # zero-weight positions cannot propose: log 0 = -inf
        terms = np.log(w[: last + 1]) + suffix[: last + 1]
    return float(np.logaddexp.reduce(terms)) - math.log(float(w.sum()))


def _log_accept(current: GCDRun, proposed: GCDRun, proposal: Proposal) -> float:
    """log of the Metropolis-Hastings acceptance probability of ``proposed`` from ``current``."""
    if proposed.tokens == current.tokens:
        return 0.0
    log_ratio = (
        proposed.logprob
        - current.logprob
        + _log_propose(proposed, current, proposal)
        - _log_propose(current, proposed, proposal)
    )
    return min(0.0, log_ratio)


def _pick_position(run: GCDRun, proposal: Proposal, rng: np.random.Generator) -> int:
    """The position a step redraws from (-1: every position is forced, nothing can change)."""
    if proposal == "restart":
        return 0
    if proposal == "prefix":
        return int(rng.integers(len(run.log_z)))
    return draw(position_weights(run, proposal), float(rng.random()))


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
    # numpy integers are integral (np.int64 from an array); bool is an int subclass but no count
    if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 0:
        raise ValueError(f"steps must be an int >= 0, got {steps!r} ({type(steps).__name__})")
    steps = int(steps)
    ids = checked_run_args(
        lm, constraint, prompt, tokenizer, n_samples, max_new_tokens, max_attempts
    )
    rng = np.random.default_rng(seed)
    budget = (steps + 1) * n_samples * 10 if max_attempts is None else max_attempts
    runs = passes = 0
    fresh = getattr(lm, "new_attempt", None)
    weigh = proposal == "priority"  # only priority's position law reads the entropies

    def run(prefix: Sequence[int], room: int) -> GCDRun:
        nonlocal runs, passes
        if not prefix_cache and fresh is not None:
            fresh()
        out = gcd_continue(lm, constraint, ids, prefix, rng, temperature, room, with_entropy=weigh)
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
            i = _pick_position(state, proposal, rng)
            if i < 0:  # GCD from any position would redraw this very string: it stays
                accepted.append(True)
                continue
            new = run(state.tokens[:i], max_new_tokens - i)
            new.log_p[:0] = state.log_p[:i]  # the kept prefix's positions, for a whole string
            new.log_z[:0] = state.log_z[:i]
            new.entropy[:0] = state.entropy[:i]
            ok = new.ok and math.log(float(rng.random()) or 1e-300) < _log_accept(
                state, new, proposal
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
