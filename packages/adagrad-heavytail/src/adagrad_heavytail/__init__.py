"""adagrad-heavytail: AdaGrad and AdaGrad-Norm under heavy-tailed noise (Liu, ICML 2026).

Modules: :mod:`.optim` (torch optimizers), :mod:`.functional` (the update rules on arrays),
:mod:`.noise` (heavy-tailed laws), :mod:`.tail` (tail-index estimation), :mod:`.problems`,
:mod:`.lower_bound` (reconstructed instances), :mod:`.schedules`, :mod:`.theory`, :mod:`.experiments`
(the rate harness).

torch is imported on first use of :mod:`.optim` (or of the optimizer names here), so that the numpy
harness and its joblib workers start without it.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from adagrad_heavytail import (
    experiments,
    functional,
    lower_bound,
    noise,
    problems,
    schedules,
    tail,
    theory,
)
from adagrad_heavytail.experiments import RateResult, Verdict, compare_to_theory, rate_sweep
from adagrad_heavytail.schedules import theory_params

_OPTIMIZERS = ("AdaGrad", "AdaGradNorm", "ClippedSGD", "NSGDM")


def __getattr__(name: str) -> Any:
    if name == "optim":
        return importlib.import_module("adagrad_heavytail.optim")
    if name in _OPTIMIZERS:
        return getattr(importlib.import_module("adagrad_heavytail.optim"), name)
    raise AttributeError(f"module 'adagrad_heavytail' has no attribute {name!r}")


try:
    __version__ = version("adagrad-heavytail")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "NSGDM",
    "AdaGrad",
    "AdaGradNorm",
    "ClippedSGD",
    "RateResult",
    "Verdict",
    "__version__",
    "compare_to_theory",
    "experiments",
    "functional",
    "lower_bound",
    "noise",
    "optim",
    "problems",
    "rate_sweep",
    "schedules",
    "tail",
    "theory",
    "theory_params",
]
