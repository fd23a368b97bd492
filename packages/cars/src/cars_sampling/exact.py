"""The exact constrained distribution of an enumerable (LM, constraint) pair, and distances to it.

These are the oracles of the tests and of the exactness reproduction: enumerate every valid string
of at most ``max_new_tokens`` tokens with its model probability, normalise, and compare empirical
sample frequencies by total variation and KL divergence.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import torch

from cars_sampling.constraints import Constraint
from cars_sampling.lm import NextTokenLM
from cars_sampling.tempering import check_logprobs, transform_logprobs


@dataclasses.dataclass(frozen=True)
class ExactDistribution:
    """``probs[w]``: P(w | w ∈ L) for every valid token tuple w (EOS excluded); ``mass`` = P(L)."""

    probs: dict[tuple[int, ...], float]
    mass: float

    def sample(self, n: int, rng: np.random.Generator) -> list[tuple[int, ...]]:
        """``n`` i.i.d. draws (the noise-floor reference)."""
        keys = list(self.probs)
        p = np.array([self.probs[k] for k in keys])
        return [keys[i] for i in rng.choice(len(keys), size=n, p=p / p.sum())]


def exact_distribution(
    lm: NextTokenLM,
    constraint: Constraint,
    *,
    max_new_tokens: int,
    prompt: Sequence[int] = (),
    temperature: float = 1.0,
    max_strings: int = 1_000_000,
) -> ExactDistribution:
    """Enumerate the valid strings by depth-first search over allowed tokens.

    Same semantics as the sampler: a string ends with an EOS in an accepting state, or is cut at
    ``max_new_tokens`` tokens and is valid if the constraint then accepts. Raises ``ValueError``
    past ``max_strings`` valid strings (the pair is not enumerable).
    """
    probs: dict[tuple[int, ...], float] = {}
    eos = constraint.eos_token_ids

    def replay(prefix: tuple[int, ...]) -> None:
        constraint.reset()
        for t in prefix:
            if not constraint.advance(t):
                raise AssertionError(f"allowed prefix {prefix} was rejected on replay")

    stack: list[tuple[tuple[int, ...], float]] = [((), 0.0)]
    while stack:
        prefix, lp = stack.pop()
        replay(prefix)
        allowed = constraint.allowed_mask().nonzero().flatten().tolist()
        raw = lm.logprobs([*prompt, *prefix]).detach().cpu()
        check_logprobs(raw, prefix)
        logp = transform_logprobs(raw, temperature).to(torch.float64)
        logp = logp - torch.logsumexp(logp, 0)  # the sampler renormalises float32 log-probs too
        for tok in allowed:
            lp_tok = lp + float(logp[tok])
            if lp_tok == -math.inf:
                continue
            if tok in eos:
                probs[prefix] = probs.get(prefix, 0.0) + math.exp(lp_tok)
            elif len(prefix) + 1 == max_new_tokens:
                replay(prefix)
                if constraint.advance(tok) and constraint.is_accepting():
                    full = (*prefix, tok)
                    probs[full] = math.exp(lp_tok)
            else:
                stack.append(((*prefix, tok), lp_tok))
            if len(probs) > max_strings:
                raise ValueError(
                    f"more than max_strings={max_strings} valid strings: not enumerable"
                )
    mass = sum(probs.values())
    if mass > 0:
        probs = {w: p / mass for w, p in probs.items()}
    return ExactDistribution(probs=probs, mass=mass)


def empirical(samples: Iterable[Sequence[int]]) -> dict[tuple[int, ...], float]:
    """Relative frequencies of token sequences."""
    counts = Counter(tuple(s) for s in samples)
    n = sum(counts.values())
    return {w: c / n for w, c in counts.items()}


def total_variation(
    p: Mapping[tuple[int, ...], float], q: Mapping[tuple[int, ...], float]
) -> float:
    """½ Σ |p − q| over the union of supports."""
    return 0.5 * sum(abs(p.get(w, 0.0) - q.get(w, 0.0)) for w in set(p) | set(q))


def kl_divergence(p: Mapping[tuple[int, ...], float], q: Mapping[tuple[int, ...], float]) -> float:
    """KL(p ‖ q) in nats; infinite when p puts mass where q has none."""
    out = 0.0
    for w, pw in p.items():
        if pw > 0:
            qw = q.get(w, 0.0)
            if qw <= 0:
                return math.inf
            out += pw * math.log(pw / qw)
    return out


def entropy(p: Mapping[tuple[int, ...], float]) -> float:
    """Shannon entropy in nats."""
    return 0.0 - sum(x * math.log(x) for x in p.values() if x > 0)  # 0.0 - : no "-0.0"


def chi_square_pvalue(samples: Sequence[Sequence[int]], exact: ExactDistribution) -> float:
    """Pearson chi-square goodness-of-fit p-value of ``samples`` against ``exact``.

    Rare strings are pooled so that every expected count is at least 5. A sample outside the
    language raises ``ValueError``: no p-value can excuse it.
    """
    counts = Counter(tuple(int(t) for t in s) for s in samples)
    outside = sum(v for k, v in counts.items() if k not in exact.probs)
    if outside:
        raise ValueError(f"{outside} samples lie outside the language")
    n = len(samples)
    obs, exp, pool_o, pool_e = [], [], 0.0, 0.0
    for key in sorted(exact.probs, key=exact.probs.__getitem__, reverse=True):
        e, o = exact.probs[key] * n, float(counts.get(key, 0))
        if e >= 5:
            obs.append(o)
            exp.append(e)
        else:
            pool_o, pool_e = pool_o + o, pool_e + e
    if pool_e > 0:
        obs.append(pool_o)
        exp.append(pool_e)
    if len(obs) < 2:
        return math.nan
    o_arr, e_arr = np.array(obs), np.array(exp)
    e_arr *= o_arr.sum() / e_arr.sum()
    stat = float(((o_arr - e_arr) ** 2 / e_arr).sum())
    dof = len(obs) - 1
    # The chi-square survival function is the regularised upper incomplete gamma function.
    return float(torch.special.gammaincc(torch.tensor(dof / 2.0), torch.tensor(stat / 2.0)))
