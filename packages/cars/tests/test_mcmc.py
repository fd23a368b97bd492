"""The MCMC baselines: exact detailed balance by enumeration, GCD at zero steps, long chains exact.

The kernel oracle below enumerates every valid string, the position each proposal picks and
GCD's probability of each suffix, independently of ``mcmc.py``; only the acceptance function
under test (or a mutant of it) is plugged in.
"""

import itertools
import math

import numpy as np
import pytest
import torch
from cars_sampling import exact_distribution, gcd_sample, sample_with, total_variation
from cars_sampling.baselines import GCDRun
from cars_sampling.exact import ExactDistribution, empirical
from cars_sampling.mcmc import _log_accept, mcmc_sample

PROPOSALS = ["prefix", "priority", "restart"]


def gcd_run_of(lm, constraint, tokens, max_new_tokens):
    """Replay ``tokens`` (plus EOS unless cut at max length): the log-probs and allowed masses."""
    eos = min(constraint.eos_token_ids)
    drawn = list(tokens) + ([eos] if len(tokens) < max_new_tokens else [])
    constraint.reset()
    log_p, log_z, entropy = [], [], []
    for t, tok in enumerate(drawn):
        logp = lm.logprobs(drawn[:t]).double()
        mask = constraint.allowed_mask()
        log_p.append(float(logp[tok]))
        log_z.append(float(torch.logsumexp(logp[mask], 0)))
        q = torch.softmax(logp[mask], 0)
        entropy.append(float(torch.special.entr(q).sum()))
        assert constraint.advance(tok)
    return GCDRun(list(tokens), log_p, log_z, True, 0, entropy)


def pick(run, proposal):
    """The position law of a step from ``run``: ρ_i over its drawn tokens (stop included)."""
    n = len(run.log_z)
    if proposal == "restart":
        return [1.0] + [0.0] * (n - 1)
    if proposal == "prefix":
        return [1 / n] * n
    w = [math.exp(h) - 1 for h in run.entropy]
    return [x / sum(w) for x in w]


def kernel(runs, proposal, log_accept):
    """K[s][s'] for s != s': the exact Metropolis-Hastings transition probabilities."""
    out = {}
    for (s, a), (s2, b) in itertools.permutations(runs.items(), 2):
        common = next(
            (k for k, (x, y) in enumerate(zip(s, s2, strict=False)) if x != y),
            min(len(s), len(s2)),
        )
        rho = pick(a, proposal)
        total = 0.0
        for i in range(min(common, len(a.log_z) - 1) + 1):  # the positions that keep s'[:i]
            q = math.exp(sum(b.log_p[i:]) - sum(b.log_z[i:]))
            total += rho[i] * q * math.exp(log_accept(a, b, proposal))
        out[(s, s2)] = total
    return out


def step_law(runs, k, steps=1):
    """The law of a chain after ``steps`` steps from a GCD start (GCD conditioned on a valid
    string): the start law pushed through the kernel ``steps`` times."""
    start = {s: math.exp(sum(r.log_p) - sum(r.log_z)) for s, r in runs.items()}
    z = sum(start.values())
    law = {s: v / z for s, v in start.items()}
    for _ in range(steps):
        nxt = {s: law[s] * (1 - sum(v for (a, _), v in k.items() if a == s)) for s in runs}
        for (s, s2), v in k.items():
            nxt[s2] += law[s] * v
        law = nxt
    return law


def balance_error(probs, k):
    """The largest relative violation of pi(s) K(s, s') = pi(s') K(s', s)."""
    flows = [(probs[s] * v, probs[s2] * k[(s2, s)]) for (s, s2), v in k.items()]
    return max(abs(a - b) / max(a, b) for a, b in flows if max(a, b) > 0)


@pytest.mark.parametrize("proposal", PROPOSALS)
def test_the_exact_distribution_satisfies_detailed_balance(toy, proposal):
    lm, c, n = toy
    exact = exact_distribution(lm, c, max_new_tokens=n)
    runs = {s: gcd_run_of(lm, c, s, n) for s in exact.probs}
    k = kernel(runs, proposal, _log_accept)
    assert balance_error(exact.probs, k) < 1e-6  # relative; the LM's log-probs are float32
    assert max(sum(v for (s, _), v in k.items() if s == x) for x in runs) <= 1 + 1e-9


@pytest.mark.parametrize("proposal", PROPOSALS)
def test_the_summed_ratio_equals_the_ratio_at_the_drawn_position(toy, proposal):
    """The weights and GCD factors before the common prefix are shared both ways, so the official
    summed form reduces to W(s'[i:]) / W(s[i:]) · Σw(s) / Σw(s') for every admissible i."""
    lm, c, n = toy
    exact = exact_distribution(lm, c, max_new_tokens=n)
    runs = {s: gcd_run_of(lm, c, s, n) for s in exact.probs}
    checked = 0
    for (s, a), (s2, b) in itertools.permutations(runs.items(), 2):
        rho = pick(a, proposal)
        pairs = enumerate(zip(s, s2, strict=False))
        common = next((k for k, (x, y) in pairs if x != y), min(len(s), len(s2)))
        for i in range(min(common, len(a.log_z) - 1) + 1):
            if rho[i] == 0:
                continue
            w_a = sum(pick_weights(a, proposal))
            w_b = sum(pick_weights(b, proposal))
            at_i = sum(b.log_z[i:]) - sum(a.log_z[i:]) + math.log(w_a) - math.log(w_b)
            assert _log_accept(a, b, proposal) == pytest.approx(min(0.0, at_i), abs=1e-9)
            checked += 1
    assert checked > 1000


def pick_weights(run, proposal):
    """Unnormalised position weights (the oracle's own, not mcmc.position_weights)."""
    if proposal == "priority":
        return [math.exp(h) - 1 for h in run.entropy]
    return [1.0] * len(run.log_z) if proposal == "prefix" else [1.0]


def without_reverse_term(a, b, proposal):
    """Mutant: P(s') q(s | s') / (P(s) q(s' | s)) without q(s | s'), the reverse proposal."""
    from cars_sampling.mcmc import _log_propose

    return min(0.0, b.logprob - a.logprob - _log_propose(a, b, proposal))


@pytest.mark.parametrize(
    ("proposal", "mutant"),
    [
        ("prefix", lambda a, b, _: _log_accept(a, b, "restart")),  # the length factor lost
        ("priority", lambda a, b, _: _log_accept(a, b, "prefix")),  # uniform positions assumed
        ("priority", without_reverse_term),
    ],
)
def test_a_wrong_ratio_breaks_detailed_balance(toy, proposal, mutant):
    lm, c, n = toy
    exact = exact_distribution(lm, c, max_new_tokens=n)
    runs = {s: gcd_run_of(lm, c, s, n) for s in exact.probs}
    assert balance_error(exact.probs, kernel(runs, proposal, mutant)) > 1e-2


def test_priority_never_redraws_a_forced_position(toy):
    """The constraint forces 'b' after 'a' (H = 0): priority gives that position weight 0."""
    from cars_sampling.mcmc import position_weights

    lm, c, n = toy
    run = gcd_run_of(lm, c, (0, 1, 2), n)  # "abc", stop
    weights = position_weights(run, "priority")
    assert weights[1] == 0 and (weights[[0, 2, 3]] > 0).all()
    assert weights == pytest.approx([math.exp(h) - 1 for h in run.entropy], rel=1e-6)


def test_priority_draws_positions_in_proportion_to_exp_entropy_minus_one(toy, chi_square):
    from cars_sampling.mcmc import _pick_position

    lm, c, n = toy
    run = gcd_run_of(lm, c, (2, 0, 1, 2, 0), n)  # "cabca", stop: six positions
    rng = np.random.default_rng(0)
    picks = [(_pick_position(run, "priority", rng),) for _ in range(6000)]
    law = {(i,): p for i, p in enumerate(pick(run, "priority")) if p > 0}
    assert chi_square(picks, ExactDistribution(law, 1.0)) > 1e-3


def test_a_string_with_every_position_forced_stays_without_a_gcd_run():
    from cars_sampling import DFAConstraint, ToyLM

    c = DFAConstraint.from_regex("ab", ["a", "b", "c", None], 3)
    res = mcmc_sample(ToyLM(4, 3, seed=1), c, steps=3, proposal="priority", max_new_tokens=4)
    assert res.token_ids == [[0, 1]] and res.n_attempts == 1
    assert res.acceptance_history == [True, True, True]


@pytest.mark.parametrize("proposal", PROPOSALS)
def test_one_step_from_gcd_follows_the_enumerated_kernel(toy, chi_square, proposal):
    """End to end: 3000 chains of one step against the oracle's law (start GCD, then K)."""
    lm, c, n = toy
    exact = exact_distribution(lm, c, max_new_tokens=n)
    runs = {s: gcd_run_of(lm, c, s, n) for s in exact.probs}
    law = step_law(runs, kernel(runs, proposal, _log_accept))
    res = mcmc_sample(lm, c, n_samples=3000, steps=1, proposal=proposal, max_new_tokens=n, seed=5)
    assert chi_square(res.token_ids, ExactDistribution(law, 1.0)) > 1e-3


@pytest.mark.slow  # 12 s; the fast guard of the carried entropies is the spy test below
def test_three_priority_steps_follow_the_enumerated_kernel_three_times(toy, chi_square):
    """Steps after the first weigh positions by the entropies the chain carried over from the
    states before (the kept prefix's): 4000 chains of three steps against K applied three times."""
    lm, c, n = toy
    exact = exact_distribution(lm, c, max_new_tokens=n)
    runs = {s: gcd_run_of(lm, c, s, n) for s in exact.probs}
    law = step_law(runs, kernel(runs, "priority", _log_accept), steps=3)
    res = mcmc_sample(lm, c, n_samples=4000, steps=3, proposal="priority", max_new_tokens=n, seed=7)
    assert chi_square(res.token_ids, ExactDistribution(law, 1.0)) > 1e-3


def test_priority_states_carry_their_entropies_across_steps(toy, monkeypatch):
    """Every state the acceptance sees (kept prefix + redrawn suffix) has one entropy per drawn
    position, equal to a fresh replay of its string's; spied on the chain's acceptance calls."""
    from cars_sampling import mcmc

    lm, c, n = toy
    seen, real_accept = [], mcmc._log_accept

    def spy_accept(current, proposed, proposal):
        seen.extend([current, proposed])
        return real_accept(current, proposed, proposal)

    monkeypatch.setattr(mcmc, "_log_accept", spy_accept)
    mcmc_sample(lm, c, n_samples=40, steps=3, proposal="priority", max_new_tokens=n, seed=0)
    assert len(seen) > 150
    for run in seen:
        assert len(run.entropy) == len(run.log_z) == len(gcd_run_of(lm, c, run.tokens, n).log_z)
        fresh = gcd_run_of(lm, c, run.tokens, n).entropy
        assert run.entropy == pytest.approx(fresh, abs=1e-6), run.tokens


@pytest.mark.parametrize("proposal", PROPOSALS)
def test_zero_steps_is_gcd_and_sample_with_runs_ten_steps(toy, proposal):
    lm, c, n = toy
    gcd = gcd_sample(lm, c, n_samples=200, max_new_tokens=n, seed=3)
    chains = mcmc_sample(lm, c, n_samples=200, steps=0, proposal=proposal, max_new_tokens=n, seed=3)
    assert chains.token_ids == gcd.token_ids and chains.n_forward_passes == gcd.n_forward_passes
    via = sample_with(f"mcmc-{proposal}", lm, c, n_samples=5, max_new_tokens=n, seed=1)
    direct = mcmc_sample(lm, c, n_samples=5, steps=10, proposal=proposal, max_new_tokens=n, seed=1)
    assert via.token_ids == direct.token_ids and len(direct.acceptance_history) == 50
    assert 0.3 < sum(direct.acceptance_history) / 50 < 1


@pytest.mark.slow
@pytest.mark.parametrize("proposal", PROPOSALS)
def test_long_chains_pass_chi_square_and_ten_steps_reduce_the_bias(toy, chi_square, proposal):
    lm, c, n = toy
    exact = exact_distribution(lm, c, max_new_tokens=n)
    res = mcmc_sample(lm, c, n_samples=1500, steps=40, proposal=proposal, max_new_tokens=n, seed=0)
    assert chi_square(res.token_ids, exact) > 1e-3
    gcd = gcd_sample(lm, c, n_samples=1000, max_new_tokens=n, seed=3)
    ten = mcmc_sample(lm, c, n_samples=1000, steps=10, proposal=proposal, max_new_tokens=n, seed=3)
    tv_gcd = total_variation(empirical(gcd.token_ids), exact.probs)
    assert total_variation(empirical(ten.token_ids), exact.probs) < tv_gcd - 0.1


def test_the_position_is_drawn_over_every_drawn_token_stop_included(toy, monkeypatch):
    """Each step picks i uniformly over len(log_z) positions (the stop token's included), the
    count _log_accept's length factor assumes; spied on the chain's own rng and GCD runs."""
    from cars_sampling import mcmc

    lm, c, n = toy
    events, real_continue, real_rng = [], mcmc.gcd_continue, np.random.default_rng

    def spy_continue(*args, **kwargs):
        events.append(("run", real_continue(*args, **kwargs)))
        return events[-1][1]

    class SpyRng:
        def __init__(self, seed):
            self._rng = real_rng(seed)

        def __getattr__(self, name):
            return getattr(self._rng, name)

        def integers(self, high):
            events.append(("pick", high))
            return self._rng.integers(high)

    monkeypatch.setattr(mcmc, "gcd_continue", spy_continue)
    monkeypatch.setattr(mcmc.np.random, "default_rng", SpyRng)
    mcmc_sample(lm, c, n_samples=30, steps=1, max_new_tokens=n, seed=0)
    picks = [(events[k - 1][1], high) for k, (kind, high) in enumerate(events) if kind == "pick"]
    assert len(picks) == 30
    assert all(start.ok and high == len(start.log_z) for start, high in picks)
    assert any(len(start.log_z) == len(start.tokens) + 1 for start, _ in picks)  # stop drawn


def test_bad_arguments_raise(toy):
    lm, c, n = toy
    with pytest.raises(ValueError, match="proposal must be one of"):
        mcmc_sample(lm, c, proposal="entropy", max_new_tokens=n)
    for steps in (-1, True, 2.0, "2", np.int64(-1)):
        with pytest.raises(ValueError, match="steps must be an int >= 0, got"):
            mcmc_sample(lm, c, steps=steps, max_new_tokens=n)


def test_steps_accepts_numpy_integers(toy):
    lm, c, n = toy
    as_numpy = mcmc_sample(lm, c, n_samples=3, steps=np.int64(2), max_new_tokens=n, seed=1)
    as_int = mcmc_sample(lm, c, n_samples=3, steps=2, max_new_tokens=n, seed=1)
    assert as_numpy.token_ids == as_int.token_ids and len(as_numpy.acceptance_history) == 6
