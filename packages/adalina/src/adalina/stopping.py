"""Stopping rules on the per-player standard errors (pyDVL's ``AbsoluteStandardError`` idiom).

A rule is called with the current standard errors and the number of sampled coalitions and says
whether the estimate is precise enough. ``approximate(budget, game)`` stops early when its
estimator's ``stopping`` rule holds (``budget`` is then a ceiling); ``partial_fit`` sets
``converged_``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np


@dataclasses.dataclass(frozen=True)
class AbsoluteStandardError:
    """Stop once at least ``fraction`` of the players have a standard error ``<= threshold``.

    ``burn_in`` sampled coalitions are required first: standard errors from a handful of samples
    are themselves noisy (the rule could fire on a lucky early stretch).
    """

    threshold: float
    fraction: float = 1.0
    burn_in: int = 30

    def __post_init__(self) -> None:
        if not (isinstance(self.threshold, (int, float)) and math.isfinite(self.threshold)):
            raise TypeError(f"threshold must be a finite number, got {self.threshold!r}")
        if self.threshold <= 0:
            raise ValueError(f"threshold must be > 0, got {self.threshold}")
        if not 0 < self.fraction <= 1:
            raise ValueError(f"fraction must lie in (0, 1], got {self.fraction}")
        if isinstance(self.burn_in, bool) or not isinstance(self.burn_in, int) or self.burn_in < 2:
            raise ValueError(f"burn_in must be an int >= 2, got {self.burn_in!r}")

    def __call__(self, stderr: np.ndarray | None, n_samples: int) -> bool:
        if stderr is None or n_samples < self.burn_in:
            return False
        return bool(np.mean(stderr <= self.threshold) >= self.fraction)
