"""wasserstein-meta: adaptive control whose adaptation geometry is an optimal-transport potential over
the training tasks, meta-learned through the closed loop (control-oriented meta-learning)."""

from importlib.metadata import PackageNotFoundError, version

from wasserstein_meta import (
    baselines,
    data,
    metrics,
    potentials,
    protocol,
    systems,
    tasks,
    trajectories,
)
from wasserstein_meta.controller import AdaptiveController
from wasserstein_meta.ensemble import LearnedEnsemble, OracleEnsemble, fit_ensemble
from wasserstein_meta.errors import SimulationDiverged
from wasserstein_meta.features import MLPFeatures, ZeroFeatures
from wasserstein_meta.potentials import bregman_divergence
from wasserstein_meta.pvtol import PVTOLController, PVTOLGains
from wasserstein_meta.simulate import Trajectory, simulate
from wasserstein_meta.spd import PDGains
from wasserstein_meta.training import History, meta_train

try:
    __version__ = version("wasserstein-meta")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "AdaptiveController",
    "History",
    "LearnedEnsemble",
    "MLPFeatures",
    "OracleEnsemble",
    "PDGains",
    "PVTOLController",
    "PVTOLGains",
    "SimulationDiverged",
    "Trajectory",
    "ZeroFeatures",
    "__version__",
    "baselines",
    "bregman_divergence",
    "data",
    "fit_ensemble",
    "meta_train",
    "metrics",
    "potentials",
    "protocol",
    "simulate",
    "systems",
    "tasks",
    "trajectories",
]
