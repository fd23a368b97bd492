"""adalina: adaptive linear-space estimation of Shapley, Banzhaf and Beta Shapley values.

Adalina (Li, Yu & Low, ICML 2026) estimates any semi-value of an ``n``-player game from ``O(n/ε²)``
utility queries with ``O(n)`` memory, choosing its control variate from the data. The package holds
the estimator, the baselines of the paper under one ``approximate(budget, game)`` interface, exact
enumeration for small games, and the games users have: model explanations (tree ensembles,
marginal features) and data valuation.
"""

from importlib.metadata import PackageNotFoundError, version

from adalina.baselines import (
    AME,
    ARM,
    GELS,
    MSR,
    OFA,
    GELSShapley,
    KernelSHAPMV,
    KernelSHAPUnbiased,
    PermutationSampling,
    ShapIQ,
)
from adalina.estimators import (
    Adalina,
    LinearApprox,
    LinearSpaceEstimator,
    MSRProb,
    NotFittedError,
    SemiValueApproximator,
    SemiValueResult,
)
from adalina.exact import exact_semivalue, linear_coefficients
from adalina.games import DataValuationGame, Game, MarginalGame, TabularGame, evaluate
from adalina.interop import to_interaction_values
from adalina.sampling import kernel_size_distribution, sampling_distribution
from adalina.semivalues import SemiValue, paper_semivalues
from adalina.stopping import AbsoluteStandardError
from adalina.trees import TreeGame, exact_tree_semivalue

try:
    __version__ = version("adalina")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "AME",
    "ARM",
    "GELS",
    "MSR",
    "OFA",
    "AbsoluteStandardError",
    "Adalina",
    "DataValuationGame",
    "GELSShapley",
    "Game",
    "KernelSHAPMV",
    "KernelSHAPUnbiased",
    "LinearApprox",
    "LinearSpaceEstimator",
    "MSRProb",
    "MarginalGame",
    "NotFittedError",
    "PermutationSampling",
    "SemiValue",
    "SemiValueApproximator",
    "SemiValueResult",
    "ShapIQ",
    "TabularGame",
    "TreeGame",
    "__version__",
    "evaluate",
    "exact_semivalue",
    "exact_tree_semivalue",
    "kernel_size_distribution",
    "linear_coefficients",
    "paper_semivalues",
    "sampling_distribution",
    "to_interaction_values",
]
