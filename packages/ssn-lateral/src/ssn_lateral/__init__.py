"""ssn-lateral: stabilized supralinear networks with E-I lateral connections and local plasticity.

``SSN`` is the batched rate model (``tau dr/dt = -r + k [W r + h]_+^n`` under Dale's law) with
steady states, Jacobians and stability tests; ``plasticity`` holds the local rules; ``SSNEncoder`` is
the scikit-learn transformer that learns an SSN code of natural-image patches.
"""

from importlib.metadata import PackageNotFoundError, version

from ssn_lateral import baselines, data, metrics, plasticity
from ssn_lateral.baselines import LCA, ICACoder, SparseCoder
from ssn_lateral.dynamics import ConvergenceWarning, SSNDivergenceError, SSNParams
from ssn_lateral.encoder import SSNEncoder
from ssn_lateral.network import SSN
from ssn_lateral.plasticity import (
    AntiHebbianIE,
    AntiHebbianII,
    CovarianceEE,
    FixedLikeToLike,
    HomeostaticThreshold,
    OjaEI,
    OjaFeedforward,
    PlasticityRule,
    RowSums,
    default_rules,
    switching_rules,
)
from ssn_lateral.training import TrainingLog, train_local

try:
    __version__ = version("ssn-lateral")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "LCA",
    "SSN",
    "AntiHebbianIE",
    "AntiHebbianII",
    "ConvergenceWarning",
    "CovarianceEE",
    "FixedLikeToLike",
    "HomeostaticThreshold",
    "ICACoder",
    "OjaEI",
    "OjaFeedforward",
    "PlasticityRule",
    "RowSums",
    "SSNDivergenceError",
    "SSNEncoder",
    "SSNParams",
    "SparseCoder",
    "TrainingLog",
    "__version__",
    "baselines",
    "data",
    "default_rules",
    "metrics",
    "plasticity",
    "switching_rules",
    "train_local",
]
