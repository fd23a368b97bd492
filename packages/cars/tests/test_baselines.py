"""sample_with: one entry point that runs exactly what the sampler or GCD would."""

import pytest
from cars_sampling import CARSSampler, gcd_sample, sample_with


@pytest.mark.parametrize("method", ["cars", "rs"])
def test_sample_with_runs_the_sampler_style(toy, method):
    lm, c, n = toy
    got = sample_with(method, lm, c, n_samples=15, max_attempts=500, max_new_tokens=n, seed=4)
    want = CARSSampler(lm, c, style=method, max_new_tokens=n, seed=4).sample(
        n_samples=15, max_attempts=500
    )
    assert got.token_ids == want.token_ids and got.n_attempts == want.n_attempts


def test_sample_with_runs_gcd(toy):
    lm, c, n = toy
    got = sample_with("gcd", lm, c, n_samples=15, max_new_tokens=n, seed=4)
    assert got.token_ids == gcd_sample(lm, c, n_samples=15, max_new_tokens=n, seed=4).token_ids


def test_sample_with_refuses_unknown_methods(toy):
    lm, c, n = toy
    with pytest.raises(ValueError, match="'mcmc'"):
        sample_with("mcmc", lm, c, max_new_tokens=n)


def masked_entropy_nats(lm, constraint, drawn):
    """The entropy (nats) of the masked, renormalised next-token law before each of ``drawn``,
    computed here in numpy from the LM's log-probs and the constraint's masks."""
    import numpy as np

    constraint.reset()
    out = []
    for t, tok in enumerate(drawn):
        logp = lm.logprobs(list(drawn[:t])).double().numpy()
        allowed = logp[constraint.allowed_mask().numpy()]
        q = np.exp(allowed - np.logaddexp.reduce(allowed))
        out.append(float(-(q[q > 0] * np.log(q[q > 0])).sum()))
        assert constraint.advance(tok)
    return out


@pytest.mark.parametrize("prefix", [(), (2,), (0, 1)])
def test_gcd_continue_records_the_masked_entropy_in_nats_only_when_asked(toy, prefix):
    """Several strings per prefix: ``entropy`` is the masked law's (not the LM's unmasked law's,
    not in bits), one per drawn position after the prefix; without ``with_entropy`` the same
    seed draws the same tokens, log-probs and masses and records no entropy."""
    import numpy as np
    from cars_sampling.baselines import gcd_continue

    lm, c, n = toy
    eos = min(c.eos_token_ids)
    checked = []
    for seed in range(8):
        run = gcd_continue(
            lm, c, [], prefix, np.random.default_rng(seed), 1.0, n, with_entropy=True
        )
        assert run.ok
        drawn = run.tokens + ([eos] if len(run.tokens) < len(prefix) + n else [])
        assert run.entropy == pytest.approx(
            masked_entropy_nats(lm, c, drawn)[len(prefix) :], abs=1e-6
        )
        checked += run.entropy
        plain = gcd_continue(lm, c, [], prefix, np.random.default_rng(seed), 1.0, n)
        assert (plain.tokens, plain.log_p, plain.log_z) == (run.tokens, run.log_p, run.log_z)
        assert plain.entropy == []
    assert max(checked) > 0.2  # free choices were seen: nats and bits differ there
