"""adascale: AdaSCALE adaptive activation scaling for post-hoc OOD detection, and its baselines.

AdaSCALE (Regmi, ICML 2026) scores an input by the energy of its logits after SCALE-style
activation scaling with a *per-sample* percentile: a gradient-guided minor perturbation of the
input shifts the top activations of OOD inputs more than those of ID inputs, and the size of the
shift, placed on the ECDF of an ID fit set, sets how strongly the sample is scaled. The package holds
the maths (:mod:`adascale.functional`), the detector, the baselines of the paper on the same
pytorch-ood-style interface (Energy, ReAct, ASH-P/B/S, SCALE, LTS, OptFS), OOD metrics with an
APS-style grid search, backbone/head splitting for torchvision and timm models, and
``torch.distributed`` fitting and evaluation.
"""

from importlib.metadata import PackageNotFoundError, version

from adascale.base import Detector, NotFittedError
from adascale.baselines import ASH, LTS, SCALE, Energy, OptFS, ReAct
from adascale.detector import AdaSCALE
from adascale.functional import (
    adaptive_percentile,
    ash_b,
    ash_p,
    ash_s,
    energy,
    gradient_perturbation,
    input_gradient,
    lts_factor,
    ood_statistic,
    optfs_shape,
    react,
    scale,
    scale_factor,
)
from adascale.metrics import (
    aupr_in,
    aupr_out,
    auroc,
    evaluate,
    fpr_at_tpr,
    grid_search,
    ood_metrics,
    score_all,
)
from adascale.models import HookedBackbone, head_name, split_model

try:
    __version__ = version("adascale")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "ASH",
    "LTS",
    "SCALE",
    "AdaSCALE",
    "Detector",
    "Energy",
    "HookedBackbone",
    "NotFittedError",
    "OptFS",
    "ReAct",
    "__version__",
    "adaptive_percentile",
    "ash_b",
    "ash_p",
    "ash_s",
    "aupr_in",
    "aupr_out",
    "auroc",
    "energy",
    "evaluate",
    "fpr_at_tpr",
    "gradient_perturbation",
    "grid_search",
    "head_name",
    "input_gradient",
    "lts_factor",
    "ood_metrics",
    "ood_statistic",
    "optfs_shape",
    "react",
    "scale",
    "scale_factor",
    "score_all",
    "split_model",
]
