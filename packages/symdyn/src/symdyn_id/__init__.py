"""symdyn-id: identify an equivariant linear system x_{t+1} = A x_t from one trajectory.

Known symmetry: :class:`EquivariantLinearSystem` (least squares on the commutant, exact from
T*(rho) = max_i ceil(e_i m_i / d_i) transitions instead of d). Unknown symmetry:
:class:`SymmetryDiscovery` (the smallest consistent commutant of a candidate library, adaptively).
"""

from importlib.metadata import PackageNotFoundError, version

from .commutant import Commutant, commutant_lstsq
from .discovery import (
    CandidateScore,
    NoConsistentCandidateWarning,
    SymmetryDiscovery,
    default_library,
)
from .estimators import EquivariantLinearSystem
from .isotypic import IsotypicBlock
from .representation import Representation
from .reynolds import WalkInfo
from .systems import random_equivariant_matrix, relative_error, simulate
from .validation import NotExcitingWarning

try:
    __version__ = version("symdyn-id")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "CandidateScore",
    "Commutant",
    "EquivariantLinearSystem",
    "IsotypicBlock",
    "NoConsistentCandidateWarning",
    "NotExcitingWarning",
    "Representation",
    "SymmetryDiscovery",
    "WalkInfo",
    "__version__",
    "commutant_lstsq",
    "default_library",
    "random_equivariant_matrix",
    "relative_error",
    "simulate",
]
