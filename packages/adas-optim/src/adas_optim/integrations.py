"""Where the official runs built AdaS: timm's optimizer factory, mmengine's registry, HF fine-tuning.

None of timm, mmengine or transformers is imported unless the function that needs it is called.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from torch import nn

from adas_optim.optimizer import AdaS

# transformers' Trainer convention: no decay on biases and LayerNorm weights.
NO_DECAY_NAMES: tuple[str, ...] = ("bias", "LayerNorm.weight", "layernorm.weight", "norm.weight")


def no_decay_param_groups(
    model: nn.Module,
    weight_decay: float,
    no_decay: Iterable[str] = NO_DECAY_NAMES,
    *,
    one_dim_no_decay: bool = False,
) -> list[dict[str, Any]]:
    """Two groups, ``weight_decay`` on the rest and 0 on parameters whose name contains one of
    ``no_decay`` (the SpikeLM ``finetune.py`` split), or also on every ≤ 1-D parameter when
    ``one_dim_no_decay`` (the timm split). Frozen parameters are left out."""
    keys = tuple(no_decay)
    decay: list[nn.Parameter] = []
    rest: list[nn.Parameter] = []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        skip = any(k in name for k in keys) or (one_dim_no_decay and p.ndim <= 1)
        (rest if skip else decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": rest, "weight_decay": 0.0},
    ]


def create_adas_timm_style(
    model: nn.Module, lr: float, weight_decay: float = 0.05, **kwargs: Any
) -> AdaS:
    """``timm.optim.create_optimizer_v2(model, "adas", ...)``'s behaviour in the official code: no
    weight decay on 1-D parameters and biases (and names in ``model.no_weight_decay()``)."""
    skip = tuple(getattr(model, "no_weight_decay", lambda: ())())
    groups = no_decay_param_groups(model, weight_decay, ("bias", *skip), one_dim_no_decay=True)
    return AdaS(groups, lr=lr, **kwargs)


def register_timm(name: str = "adas") -> None:
    """Register AdaS in timm's optimizer registry, so ``create_optimizer_v2(model, "adas")`` works."""
    from timm.optim._optim_factory import OptimInfo, default_registry

    default_registry.register(
        OptimInfo(
            name=name,
            opt_class=AdaS,
            description="AdaS: AdamW mixed with momentum SGD per tensor (adas-optim)",
            has_betas=True,
            has_eps=True,
        )
    )


def register_mmengine(name: str = "AdaS") -> type[AdaS]:
    """Register AdaS in mmengine's ``OPTIMIZERS`` (the mmseg config's ``dict(type="AdaS", ...)``)."""
    from mmengine.registry import OPTIMIZERS

    if name not in OPTIMIZERS.module_dict:
        OPTIMIZERS.register_module(name=name, module=AdaS)
    return AdaS
