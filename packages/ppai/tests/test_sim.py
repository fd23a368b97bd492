"""The simulator: logged propensities are the probabilities the arms were drawn with."""

import numpy as np
import pytest
from ppai.sim import (
    UCB,
    EpsilonGreedy,
    LinearContextualBandit,
    NoisyOracle,
    ThompsonSampling,
    Uniform,
    simulate,
)


@pytest.mark.parametrize(
    "policy, floor",
    [
        (EpsilonGreedy(0.2), 0.1),
        (ThompsonSampling(clip=0.05), 0.05),
        (UCB(clip=0.1), 0.1),
        (Uniform(), 0.5),
    ],
)
def test_policies_log_valid_propensities(policy, floor):
    env = LinearContextualBandit.default()
    ex = simulate(
        env,
        policy,
        NoisyOracle.informative(env),
        T=300,
        N=10,
        reps=50,
        rng=np.random.default_rng(0),
    )
    P = ex.propensity
    np.testing.assert_allclose(P.sum(-1), 1.0, rtol=1e-12)
    assert P.min() >= floor - 1e-12
    # The played arm's frequency matches its average logged propensity (within 5 binomial s.e.).
    played = (ex.A == 1).mean()
    expected = P[..., 1].mean()
    assert abs(played - expected) < 5 * np.sqrt(expected * (1 - expected) / ex.A.size)


def test_thompson_probabilities_with_three_arms_are_a_distribution():
    beta = np.array([[0.5, 0.0], [0.0, 0.5], [-0.2, 0.2]])
    env = LinearContextualBandit(beta, np.array([0.0, 0.1, 0.2]))
    ex = simulate(
        env,
        ThompsonSampling(clip=0.05, n_draws=64),
        NoisyOracle.useless(env),
        T=200,
        N=5,
        reps=10,
        rng=np.random.default_rng(1),
    )
    np.testing.assert_allclose(ex.propensity.sum(-1), 1.0)
    assert ex.propensity.min() >= 0.05 - 1e-12 and ex.pred_u.shape == (10, 5, 3)


def test_adaptive_policies_select_on_the_context():
    """The greedy arm depends on x, so the rounds that played an arm are not a random sample."""
    env = LinearContextualBandit.default()
    ex = simulate(
        env,
        EpsilonGreedy(0.1),
        NoisyOracle.informative(env),
        T=1000,
        N=10,
        reps=20,
        rng=np.random.default_rng(2),
    )
    m = env.mean_reward(ex.X)
    assert m[..., 1][ex.A == 1].mean() > env.arm_means()[1] + 0.1


def test_environment_and_predictors():
    env = LinearContextualBandit.default()
    rng = np.random.default_rng(3)
    X = env.contexts(rng, (50_000,))
    np.testing.assert_allclose(env.outcomes(rng, X).mean(0), env.arm_means(), atol=0.02)
    perfect = NoisyOracle(env).predict(X, rng)
    np.testing.assert_allclose(perfect, env.mean_reward(X))
    useless = NoisyOracle.useless(env).predict(X, rng)
    assert abs(np.corrcoef(useless[:, 1], env.outcomes(rng, X)[:, 1])[0, 1]) < 0.02
    binary = LinearContextualBandit.default(binary=True)
    Y = binary.outcomes(rng, X[:1000])
    assert set(np.unique(Y)) <= {0.0, 1.0} and binary.arm_means(n_mc=10_000).shape == (2,)
    with pytest.raises(ValueError, match="intercept must have one entry per arm"):
        LinearContextualBandit(np.ones((2, 3)), np.zeros(3))
    with pytest.raises(ValueError, match="epsilon must lie in"):
        EpsilonGreedy(1.5)
    with pytest.raises(ValueError, match=r"clip=0.6 exceeds 1/K = 0.5"):
        simulate(env, UCB(clip=0.6, warmup=0), NoisyOracle(env), T=2, N=1, reps=1, rng=rng)
