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
    agree, so λ does not matter; 0/0 in the official code when also ``m = 0`` and ``γ = 0``). Only
    those two: a NaN or negative γ raises, and a NaN norm (a NaN gradient) gives a NaN λ, visibly.
    """
    if not gamma >= 0.0:  # NaN too: a group's γ edited after construction is checked here
        raise ValueError(f"gamma must be >= 0 (and not NaN), got {gamma}")
    bonus: float | torch.Tensor
    if isinstance(step_size, torch.Tensor):
        # η = 0 is the warm-up guard (bonus ∞, so λ = 1), γ = 0 included (0/0 otherwise). No host
        # check of η here (a device tensor when capturable): a NaN η gives a NaN λ, visibly.
        bonus = torch.where(step_size == 0, math.inf, 2.0 * gamma / step_size)
    else:
        bonus = math.inf if step_size == 0 else 2.0 * gamma / step_size
    ratio = ((m_sq + bonus) / diff_sq).sqrt_().clamp_(0.0, 1.0)
    # a = m (diff_sq = 0) with a zero numerator is 0/0: λ = 1 there, and nowhere else.
    return torch.where((diff_sq == 0) & (m_sq + bonus == 0), 1.0, ratio)


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
