"""Errors the simulator and the validators raise."""

from __future__ import annotations


class SimulationDiverged(RuntimeError):
    """The closed loop left the region where the plant is meaningful (state norm or NaN).

    ``time`` is the simulated time of the first bad step, ``index`` the batch entries that diverged,
    ``reference`` and ``wind`` what those entries were tracking and flying in (where known).
    """

    def __init__(self, time: float, index: list[int], reference: list[int], wind: list[float]):
        self.time = time
        self.index = index
        self.reference = reference
        self.wind = wind
        super().__init__(
            f"closed loop diverged at t={time:.4g} s (state norm > 1e6 or non-finite) in batch "
            f"entries {index[:5]}: references {reference[:5]}, winds {[round(w, 4) for w in wind[:5]]}"
        )
