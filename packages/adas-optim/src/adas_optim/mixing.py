"""The AdaS mixing coefficient, as pure functions on tensors.

AdaS steps along ``d = λ·a + (1 − λ)·m`` at step size ``η = lr / (1 − β₁ᵗ)``, where ``a = m / D`` is the
AdamW direction (``D = sqrt(v / (1 − β₂ᵗ)) + ε``) and ``m`` the momentum-SGD direction. Per tensor,

    λ = clip( sqrt(‖m‖² + 2γ/η) / ‖a − m‖ , 0, 1 )

with Frobenius norms of the whole tensor. Since ``‖d − m‖ = λ‖a − m‖``, an unclipped λ holds the excess
update energy ``(η/2)‖d − m‖² − (η/2)‖m‖²`` at exactly γ: γ is a target energy in units of η, so
the knob that matters is ``γ/η`` (re-tune γ when the learning rate changes).

The functions take *squared* norms so that a tensor sharded across ranks can sum its partial squares
(one all-reduce) before λ is formed, and give the unsharded λ exactly.
"""

from __future__ import annotations

import math

import torch


def mixing_lambda(
    m_sq: torch.Tensor,
    diff_sq: torch.Tensor,
    gamma: float,
    step_size: float | torch.Tensor,
) -> torch.Tensor:
    """λ from ``m_sq = ‖m‖²`` and ``diff_sq = ‖a − m‖²`` (any shape, elementwise), in [0, 1].

    Degenerate cases give λ = 1 rather than a division by zero: ``η = 0`` (a learning-rate warm-up
    from zero; the official code raises ``ZeroDivisionError`` there) and ``a = m`` (both directions
    agree, so λ does not matter; 0/0 in the official code when also ``m = 0`` and ``γ = 0``).
    """
    if isinstance(step_size, torch.Tensor):
        # η = 0 with γ = 0 is 0/0: read it as the warm-up guard (bonus ∞, so λ = 1) too.
        bonus: float | torch.Tensor = (2.0 * gamma / step_size).nan_to_num(nan=math.inf)
    else:
        bonus = math.inf if step_size == 0 else 2.0 * gamma / step_size
    # diff_sq = 0 gives ∞ (clipped to 1) or, with a zero numerator, 0/0 = NaN: both mean λ = 1.
    ratio = (m_sq + bonus) / diff_sq
    return ratio.sqrt_().clamp_(0.0, 1.0).nan_to_num_(nan=1.0)


def excess_energy(
    lam: torch.Tensor, diff_sq: torch.Tensor, step_size: float | torch.Tensor
) -> torch.Tensor:
    """``(η/2)·‖d − m‖² = (η/2)·λ²·‖a − m‖²``: how far the update strays from momentum SGD.

    For an unclipped λ this equals ``(η/2)‖m‖² + γ``; a label-honest proxy of the paper's
    "update noise", whose exact definition is not public.
    """
    return 0.5 * step_size * lam.square() * diff_sq


def reference_step(
    param: torch.Tensor,
    grad: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    step: int,
    *,
    lr: float,
    gamma: float,
    betas: tuple[float, float],
    eps: float,
    weight_decay: float,
    correct_bias: bool = True,
    sgd_component: str = "momentum",
) -> torch.Tensor:
    """One AdaS step written out line by line as the official ``cifar10-dvs/optimizer.py`` has it.

    Out of place (returns the new parameter, updates ``exp_avg``/``exp_avg_sq`` in place); ``step``
    is the 1-based step number. The test oracle for :class:`~adas_optim.AdaS`, not a fast path.
    """
    beta1, beta2 = betas
    bc1 = 1 - beta1**step if correct_bias else 1.0
    bc2 = 1 - beta2**step if correct_bias else 1.0
    param = param * (1 - lr * weight_decay)
    exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    denom = exp_avg_sq.sqrt() / bc2**0.5 + eps
    step_size = lr / bc1
    adam = exp_avg / denom
    lam = mixing_lambda(exp_avg.square().sum(), (adam - exp_avg).square().sum(), gamma, step_size)
    sgd = exp_avg if sgd_component == "momentum" else grad
    return param - step_size * lam * adam - step_size * (1 - lam) * sgd
