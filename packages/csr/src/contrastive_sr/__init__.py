"""contrastive-sr: Contrastive Symbolic Regression (Zhang et al., ICML 2026) for scikit-learn.

GP-constructed features, scored by ridge + k-NN in a closed-form contrastive metric space, selected by
double lexicase, ensembled from a DPP archive. The parts work alone on raw features:
:class:`ContrastiveMetric`, :class:`LOOKNeighborsRegressor`, :func:`dpp_greedy_select`.
"""

from importlib.metadata import PackageNotFoundError, version

from contrastive_sr.contrastive import ContrastiveMetric, solve_transformation_matrix
from contrastive_sr.dpp import dpp_greedy_select
from contrastive_sr.estimators import ContrastiveSymbolicRegressor
from contrastive_sr.learners import BASE_LEARNERS
from contrastive_sr.neighbors import LOOKNeighborsRegressor, linear_rank_weights
from contrastive_sr.primitives import PRIMITIVES

try:
    __version__ = version("contrastive-sr")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "BASE_LEARNERS",
    "PRIMITIVES",
    "ContrastiveMetric",
    "ContrastiveSymbolicRegressor",
    "LOOKNeighborsRegressor",
    "__version__",
    "dpp_greedy_select",
    "linear_rank_weights",
    "solve_transformation_matrix",
]
