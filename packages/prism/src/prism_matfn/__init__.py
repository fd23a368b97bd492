"""prism-matfn: PRISM matrix functions (polar, sign, square and inverse roots) with a per-step fitted
coefficient, plus the PrismMuon and PrismShampoo optimizers built on them."""

from importlib.metadata import PackageNotFoundError, version

from prism_matfn import baselines, optim
from prism_matfn.alpha import ALPHA_BOUNDS, CLASSIC_ALPHA, fit_alpha
from prism_matfn.errors import ConvergenceError
from prism_matfn.integrations import dion_newton_schulz, zeropower_via_prism
from prism_matfn.matfn import (
    PrismInfo,
    PrismOptions,
    inv_root,
    inv_sqrtm,
    polar,
    residual,
    sign,
    sqrtm,
    sqrtm_and_inv,
)
from prism_matfn.sketch import gaussian_sketch

try:
    __version__ = version("prism-matfn")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "ALPHA_BOUNDS",
    "CLASSIC_ALPHA",
    "ConvergenceError",
    "PrismInfo",
    "PrismOptions",
    "__version__",
    "baselines",
    "dion_newton_schulz",
    "fit_alpha",
    "gaussian_sketch",
    "inv_root",
    "inv_sqrtm",
    "optim",
    "polar",
    "residual",
    "sign",
    "sqrtm",
    "sqrtm_and_inv",
    "zeropower_via_prism",
]
