"""Unsupervised training with local rules, watched by a stability monitor that backs the rate off.

Each step: steady states of a mini-batch, the rules' deltas, ``block += lr_scale * delta``, the
projection. Every ``monitor_every`` steps the spectral abscissa is measured at the fixed points of a
few held patches; if one is >= 0 (or a steady state diverges) the weights go back to the last good
snapshot and ``lr_scale`` halves (SSN training is prone to instabilities: Soo & Lengyel 2022).
"""

from __future__ import annotations

import copy
import dataclasses
import warnings
from collections.abc import Callable, Sequence

import torch

from ssn_lateral.dynamics import ConvergenceWarning, SSNDivergenceError, spectral_abscissa
from ssn_lateral.network import BLOCKS, SSN
from ssn_lateral.plasticity import PlasticityRule, RowSums, apply_deltas, project_

__all__ = ["TrainingLog", "init_network", "train_local"]


@dataclasses.dataclass
class TrainingLog:
    """What training did: learning-rate backoffs, monitored abscissae, rates, unconverged batches."""

    backoffs: list[int] = dataclasses.field(default_factory=list)
    abscissa: list[float] = dataclasses.field(default_factory=list)
    mean_rate_e: list[float] = dataclasses.field(default_factory=list)
    unconverged_batches: int = 0
    lr_scale: float = 1.0


@torch.no_grad()
def init_network(
    net: SSN,
    X: torch.Tensor,
    generator: torch.Generator,
    *,
    init: str = "patches",
    targets: RowSums | None = None,
) -> SSN:
    """Random non-negative lateral blocks; feed-forward rows from data patches or uniform noise.

    ``init="patches"`` starts each unit's filter at the ON/OFF channels of a random patch
    (scikit-learn #6986 asks this of dictionary learning); ``"random"`` draws them uniformly.
    """
    if init not in ("patches", "random"):
        raise ValueError(f"init must be 'patches' or 'random', got {init!r}")
    dtype = net.W_ee.dtype
    for name in BLOCKS:
        block = getattr(net, name)
        block.data.copy_(torch.rand(block.shape, generator=generator, dtype=dtype))
    for name in ("Q_e", "Q_i"):
        q = getattr(net, name)
        if init == "patches" and X.shape[0]:
            idx = torch.randint(X.shape[0], (q.shape[0],), generator=generator)
            rows = net.channels(X[idx].to(dtype))
            rows = rows + 1e-3 * torch.rand(rows.shape, generator=generator, dtype=dtype)
        else:
            rows = torch.rand(q.shape, generator=generator, dtype=dtype)
            if net.signed_input:
                rows = rows - 0.5
        q.data.copy_(rows)
    net.b.data.zero_()
    return project_(net, targets)


def _merge(rules: Sequence[PlasticityRule], net: SSN, pre: torch.Tensor, r: torch.Tensor):
    total: dict[str, torch.Tensor] = {}
    for rule in rules:
        for name, delta in rule(net, pre, r).items():
            total[name] = total[name] + delta if name in total else delta
    return total


def _monitor(net: SSN, X_monitor: torch.Tensor, contrasts: Sequence[float]) -> float:
    """Largest spectral abscissa over the monitor patches' fixed points (inf if one diverges)."""
    worst = -float("inf")
    for c in contrasts:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                r = net.steady_state(X_monitor, contrast=c)
        except SSNDivergenceError:
            return float("inf")
        worst = max(worst, float(spectral_abscissa(net.jacobian(r)).max()))
    return worst


@torch.no_grad()
def train_local(
    net: SSN,
    X: torch.Tensor,
    rules: Sequence[PlasticityRule],
    *,
    n_iter: int,
    batch_size: int,
    generator: torch.Generator,
    contrast: float = 1.0,
    targets: RowSums | None = None,
    monitor_every: int = 50,
    monitor_contrasts: Sequence[float] = (0.1, 1.0, 2.0),
    n_monitor: int = 16,
    min_lr_scale: float = 1e-3,
    callback: Callable[[int], None] | None = None,
) -> TrainingLog:
    """Train ``net`` in place on rows of ``X`` with ``rules``; see the module docstring."""
    log = TrainingLog()
    X_monitor = X[torch.randperm(X.shape[0], generator=generator)[:n_monitor]]
    good = copy.deepcopy(net.state_dict())

    def back_off(step: int) -> None:
        net.load_state_dict(good)
        log.lr_scale *= 0.5
        log.backoffs.append(step)
        if log.lr_scale < min_lr_scale:
            raise SSNDivergenceError(
                f"training kept destabilising the network: learning-rate scale {log.lr_scale:.3g} "
                f"< min_lr_scale={min_lr_scale} after {len(log.backoffs)} backoffs (step {step})"
            )

    for step in range(n_iter):
        xb = X[torch.randint(X.shape[0], (batch_size,), generator=generator)]
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                r = net.steady_state(xb, contrast=contrast)
            log.unconverged_batches += any(
                issubclass(w.category, ConvergenceWarning) for w in caught
            )
        except SSNDivergenceError:
            back_off(step)
            continue
        pre = net.channels(contrast * xb.to(r.dtype))
        apply_deltas(net, _merge(rules, net, pre, r), log.lr_scale)
        project_(net, targets)
        log.mean_rate_e.append(float(r[:, : net.n_e].mean()))
        if (step + 1) % monitor_every == 0 or step == n_iter - 1:
            worst = _monitor(net, X_monitor, monitor_contrasts)
            log.abscissa.append(worst)
            if worst >= 0:
                back_off(step)
            else:
                good = copy.deepcopy(net.state_dict())
        if callback is not None:
            callback(step)
    if log.unconverged_batches:
        warnings.warn(
            f"{log.unconverged_batches} of {n_iter} training batches did not reach tol within t_max; "
            "their rates were still used",
            ConvergenceWarning,
            stacklevel=2,
        )
    return log
