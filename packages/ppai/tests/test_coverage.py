"""Monte-Carlo coverage of nominal 95 % intervals on simulated adaptive experiments (fast: 200 reps)."""

import numpy as np
import ppai
import pytest
from ppai.sim import LinearContextualBandit, NoisyOracle, ThompsonSampling, simulate

REPS = 200
# The spec's band (§6.6) for the coverage of a nominal 95 % interval.
LOW, HIGH = 0.91, 0.98


def _coverage(predictor, seed):
    env = LinearContextualBandit.default()
    ex = simulate(
        env,
        ThompsonSampling(clip=0.1),
        predictor(env),
        T=1000,
        N=5000,
        reps=REPS,
        rng=np.random.default_rng(seed),
    )
    truth = env.arm_means()[1]
    out = {"ipw": [], "ppai": [], "naive": []}
    for r in range(REPS):
        d = ex.rep(r)
        for name, kw in (("ipw", {"lam": 0.0}), ("ppai", {}), ("naive", {"weighting": "none"})):
            fit = ppai.PPAI("mean", target_arm=1, **kw).fit(
                None, d["A"], d["Y"], d["propensity"], d["pred_labeled"], None, d["pred_unlabeled"]
            )
            lo, hi = fit.conf_int()[0]
            out[name].append((lo <= truth <= hi, hi - lo))
    return {k: np.mean(v, axis=0) for k, v in out.items()}


@pytest.mark.parametrize("kind", ["informative", "useless"])
def test_coverage_within_monte_carlo_error(kind):
    res = _coverage(getattr(NoisyOracle, kind), seed=11)
    assert LOW <= res["ppai"][0] <= HIGH, res
    assert LOW <= res["ipw"][0] <= HIGH, res
    width_ratio = res["ppai"][1] / res["ipw"][1]
    if kind == "informative":
        assert width_ratio < 0.8, res
    else:
        assert width_ratio <= 1.02, res  # never materially wider than labeled-only
    # Ignoring the adaptivity (PPI++ on the rounds that played the arm) loses coverage.
    assert res["naive"][0] < LOW - 0.05, res


def test_labeled_contexts_in_a_small_pool_keep_coverage_and_narrow():
    """With N < T the labeled contexts' predictions for every arm add real information."""
    env = LinearContextualBandit.default()
    ex = simulate(
        env,
        ThompsonSampling(clip=0.1),
        NoisyOracle.informative(env),
        T=1000,
        N=500,
        reps=REPS,
        rng=np.random.default_rng(12),
    )
    out = {False: [], True: []}
    for r in range(REPS):
        d = ex.rep(r)
        for lc in out:
            fit = ppai.PPAI("mean", target_arm=1, include_labeled_contexts=lc).fit(
                None, d["A"], d["Y"], d["propensity"], d["pred_labeled"], None, d["pred_unlabeled"]
            )
            lo, hi = fit.conf_int()[0]
            out[lc].append((lo <= 0.3 <= hi, hi - lo))
    sep, joint = np.mean(out[False], axis=0), np.mean(out[True], axis=0)
    assert LOW <= joint[0] <= HIGH, (sep, joint)
    assert joint[1] < 0.95 * sep[1], (sep, joint)


def test_quantile_inversion_interval_covers_under_adaptivity():
    """The median of Y(1) (0.3: Y(1) is symmetric about its mean) under clipped Thompson sampling."""
    env = LinearContextualBandit.default()
    ex = simulate(
        env,
        ThompsonSampling(clip=0.1),
        NoisyOracle.informative(env),
        T=1000,
        N=5000,
        reps=REPS,
        rng=np.random.default_rng(13),
    )
    out = {"tuned": [], "ipw": []}
    for r in range(REPS):
        d = ex.rep(r)
        args = (d["Y"], d["A"], d["propensity"], d["pred_labeled"], d["pred_unlabeled"])
        for name, lam in (("tuned", None), ("ipw", 0.0)):
            lo, hi = ppai.ppai_quantile_ci(
                *args, arm=1, q=0.5, lam=lam, method="inversion", alpha=0.05
            )
            out[name].append((lo <= 0.3 <= hi, hi - lo))
    tuned, ipw = np.mean(out["tuned"], axis=0), np.mean(out["ipw"], axis=0)
    assert LOW <= tuned[0] <= HIGH and LOW <= ipw[0] <= HIGH, (tuned, ipw)
    assert tuned[1] < 0.9 * ipw[1], (tuned, ipw)
