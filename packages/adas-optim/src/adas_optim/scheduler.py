"""``LinearGammaScheduler``: γ moved linearly from a start to an end value, once per epoch."""

from __future__ import annotations

from typing import Any

import torch


def linear_gamma(epoch: int, start: float, end: float, total_epochs: int) -> float:
    """γ after ``epoch ≥ 1`` scheduler steps: ``start + (end − start)·min(e/(E − 1), 1)``; ``E ≤ 1`` → end."""
    if total_epochs <= 1:
        return end
    return start + (end - start) * min(epoch / (total_epochs - 1), 1.0)


class LinearGammaScheduler:
    """Sets every group's ``gamma`` to ``start_gamma`` now and moves it to ``end_gamma`` over
    ``total_epochs`` calls of :meth:`step` (call it once per epoch), as the official code does.

    Works on any optimizer whose groups have a ``gamma`` (an :class:`~adas_optim.AdaS`).
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        start_gamma: float = 1.0,
        end_gamma: float = 0.0,
        total_epochs: int = 100,
    ) -> None:
        for i, group in enumerate(optimizer.param_groups):
            if "gamma" not in group:
                raise ValueError(
                    f"param group {i} of {type(optimizer).__name__} has no 'gamma' "
                    f"(keys: {sorted(k for k in group if k != 'params')}); "
                    "LinearGammaScheduler drives an AdaS optimizer"
                )
        for name, value in (("start_gamma", start_gamma), ("end_gamma", end_gamma)):
            if not value >= 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
        if total_epochs < 1:
            raise ValueError(f"total_epochs must be >= 1, got {total_epochs}")
        self.optimizer = optimizer
        self.start_gamma, self.end_gamma = start_gamma, end_gamma
        self.total_epochs = total_epochs
        self.current_epoch = 0
        self._apply()

    def _apply(self) -> None:
        gamma = self.get_gamma()
        for group in self.optimizer.param_groups:
            group["gamma"] = gamma

    def get_gamma(self) -> float:
        """γ for the current epoch."""
        if self.current_epoch == 0:
            return self.start_gamma
        return linear_gamma(self.current_epoch, self.start_gamma, self.end_gamma, self.total_epochs)

    def step(self) -> None:
        """Advance one epoch and set the groups' γ."""
        self.current_epoch += 1
        self._apply()

    def state_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)
        self._apply()
