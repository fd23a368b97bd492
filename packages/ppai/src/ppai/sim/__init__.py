"""Simulated adaptive experiments with known truth: bandit environments, logging policies, predictors.

Everything is batched over independent replications (a leading axis R), so a Monte-Carlo study of
hundreds of experiments is a handful of numpy calls per round.
"""

from ppai.sim.environments import LinearContextualBandit
from ppai.sim.experiment import Experiments, simulate
from ppai.sim.policies import UCB, EpsilonGreedy, Policy, ThompsonSampling, Uniform
from ppai.sim.predictors import NoisyOracle

__all__ = [
    "UCB",
    "EpsilonGreedy",
    "Experiments",
    "LinearContextualBandit",
    "NoisyOracle",
    "Policy",
    "ThompsonSampling",
    "Uniform",
    "simulate",
]
