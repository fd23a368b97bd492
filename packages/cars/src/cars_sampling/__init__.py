"""cars-sampling: exact constrained sampling from language models (Constrained Adaptive Rejection Sampling).

``CARSSampler(lm, constraint, style="cars").sample(prompt, n_samples)`` returns i.i.d. samples of
``P(w | w ∈ L)``, learning from every rejection which prefixes are invalid so that acceptance only
improves. Baselines (GCD, rejection sampling) share the API; constraints come from a pure-Python
DFA/regex backend, prefix predicates, or ``llguidance`` grammars (Lark, regex, JSON schema).
"""

from importlib.metadata import PackageNotFoundError, version

from cars_sampling.baselines import ancestral_sample, gcd_sample, rejection_sample, sample_with
from cars_sampling.constraints import (
    Constraint,
    DFAConstraint,
    PrefixPredicateConstraint,
    TableDFA,
    accept_all,
    token_strings,
)
from cars_sampling.errors import GrammarError, TrieMemoryError
from cars_sampling.exact import (
    ExactDistribution,
    empirical,
    entropy,
    exact_distribution,
    kl_divergence,
    total_variation,
)
from cars_sampling.llguidance_backend import LLGuidanceConstraint
from cars_sampling.lm import NextTokenLM, ToyLM
from cars_sampling.mcmc import mcmc_sample
from cars_sampling.processor import CARSLogitsProcessor, generate_kwargs
from cars_sampling.regex import RegexDFA
from cars_sampling.sampler import STYLES, CARSSampler, CARSStats, SampleResult
from cars_sampling.transformers_lm import TransformersLM, sequence_logprob, stop_token_ids
from cars_sampling.trie import Trie, invariant_error
from cars_sampling.xgrammar_backend import XGrammarConstraint

try:
    __version__ = version("cars-sampling")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "STYLES",
    "CARSLogitsProcessor",
    "CARSSampler",
    "CARSStats",
    "Constraint",
    "DFAConstraint",
    "ExactDistribution",
    "GrammarError",
    "LLGuidanceConstraint",
    "NextTokenLM",
    "PrefixPredicateConstraint",
    "RegexDFA",
    "SampleResult",
    "TableDFA",
    "ToyLM",
    "TransformersLM",
    "Trie",
    "TrieMemoryError",
    "XGrammarConstraint",
    "__version__",
    "accept_all",
    "ancestral_sample",
    "empirical",
    "entropy",
    "exact_distribution",
    "gcd_sample",
    "generate_kwargs",
    "invariant_error",
    "kl_divergence",
    "mcmc_sample",
    "rejection_sample",
    "sample_with",
    "sequence_logprob",
    "stop_token_ids",
    "token_strings",
    "total_variation",
]
