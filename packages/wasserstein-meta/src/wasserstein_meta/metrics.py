"""Metrics of a simulated :class:`~wasserstein_meta.simulate.Trajectory` (one number per entry)."""

from __future__ import annotations

import torch

from wasserstein_meta.simulate import Trajectory


def _rms(values: torch.Tensor) -> torch.Tensor:
    # values (B, N+1): trapezoidal time average, then square root.
    mean = (0.5 * (values[:, 1:] + values[:, :-1])).mean(-1)
    return mean.sqrt()


def rms_tracking_error(traj: Trajectory) -> torch.Tensor:
    """``sqrt(mean_t ‖e‖² + ‖ė‖²)``: the base code's test metric."""
    return _rms(((traj.q - traj.r) ** 2 + (traj.dq - traj.dr) ** 2).sum(-1))


def rms_control(traj: Trajectory) -> torch.Tensor:
    """``sqrt(mean_t ‖u‖²)``."""
    return _rms((traj.u**2).sum(-1))


def rms_estimation_error(traj: Trajectory) -> torch.Tensor:
    """``sqrt(mean_t ‖Â y − f‖²)``: how well the adapted model predicts the true disturbance."""
    return _rms(((traj.estimate - traj.force) ** 2).sum(-1))
