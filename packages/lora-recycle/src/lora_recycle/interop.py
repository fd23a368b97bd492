"""peft interop: pool experts as peft adapters, peft's weighted merge, and the target-task LoRA."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from lora_recycle.adapters import (
    LoraExpert,
    lora_config_dict,
    parse_state_dict,
    scaling_from_config,
)
from lora_recycle.pool import linear_shapes

# The paper's target-task LoRA (spec §2.4): r=64, alpha 16, dropout 0.1, lr 3e-4, 400 steps.
TARGET_RANK, TARGET_ALPHA, TARGET_DROPOUT, TARGET_LR, TARGET_STEPS = 64, 16.0, 0.1, 3e-4, 400


def _peft_config(expert: LoraExpert) -> Any:
    from peft import LoraConfig

    # alpha = s·r with rsLoRA off gives peft exactly the scaling the pool folded in.
    fields = lora_config_dict(expert.rank, expert.scaling * expert.rank, expert.modules)
    return LoraConfig(
        **{k: v for k, v in fields.items() if k not in ("peft_type", "base_model_name_or_path")}
    )


def to_peft_model(
    base_model: nn.Module, experts: Sequence[LoraExpert], names: Sequence[str] | None = None
) -> Any:
    """A ``PeftModel`` holding each expert as an adapter (``e0, e1, …`` unless ``names``)."""
    from peft import get_peft_model, set_peft_model_state_dict

    names = list(names or [f"e{i}" for i in range(len(experts))])
    model: Any = None
    for name, expert in zip(names, experts, strict=True):
        if model is None:
            model = get_peft_model(base_model, _peft_config(expert), adapter_name=name)
        else:
            model.add_adapter(name, _peft_config(expert))
        state = {}
        for module, (a, b) in expert.factors.items():
            state[f"base_model.model.{module}.lora_A.weight"] = a
            state[f"base_model.model.{module}.lora_B.weight"] = b
        result: Any = set_peft_model_state_dict(model, state, adapter_name=name)
        if result.unexpected_keys:
            raise ValueError(
                f"peft did not take keys {result.unexpected_keys[:3]} of {expert.adapter_id!r}"
            )
    return model


def peft_weighted_adapter(
    base_model: nn.Module,
    experts: Sequence[LoraExpert],
    weights: Sequence[float],
    combination_type: str,
    **kwargs: Any,
) -> Any:
    """peft's ``add_weighted_adapter`` over ``experts`` (adapter ``merged`` active), for parity tests."""
    model = to_peft_model(base_model, experts)
    names = [f"e{i}" for i in range(len(experts))]
    model.add_weighted_adapter(
        names, list(weights), "merged", combination_type=combination_type, **kwargs
    )
    model.set_adapter("merged")
    return model


def train_target_lora(
    base_model: nn.Module,
    train_dataset: Sequence[dict[str, torch.Tensor]],
    *,
    loss_fn: Callable[[nn.Module, dict[str, torch.Tensor]], torch.Tensor] | None = None,
    r: int = TARGET_RANK,
    lora_alpha: float = TARGET_ALPHA,
    lora_dropout: float = TARGET_DROPOUT,
    lr: float = TARGET_LR,
    steps: int = TARGET_STEPS,
    batch_size: int = 8,
    target_modules: Sequence[str] | None = None,
    seed: int = 0,
    adapter_id: str = "target",
) -> LoraExpert:
    """Train a new peft LoRA on the target data (the paper's "train a LoRA on the same 100 examples").

    Defaults are the paper's (r 64, alpha 16, dropout 0.1, AdamW lr 3e-4, 400 steps) on every linear
    module. ``base_model`` is not modified (peft is unloaded afterwards). Returns the LoRA as an expert.
    """
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict
    from torch.utils.data import DataLoader
    from transformers import default_data_collator

    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr!r}")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be an int >= 1, got {steps!r}")
    modules = list(
        target_modules or [m for m in linear_shapes(base_model) if m.split(".")[-1] != "lm_head"]
    )
    config = LoraConfig(
        **{
            k: v
            for k, v in lora_config_dict(r, lora_alpha, modules, lora_dropout=lora_dropout).items()
            if k not in ("peft_type", "base_model_name_or_path")
        }
    )
    config.inference_mode = False
    torch.manual_seed(seed)
    model = get_peft_model(base_model, config, adapter_name="target")
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    examples: Any = list(train_dataset)
    loader: DataLoader[Any] = DataLoader(
        examples,
        batch_size=batch_size,
        shuffle=True,
        collate_fn=default_data_collator,
        generator=torch.Generator().manual_seed(seed),
    )
    model.train()
    step = 0
    while step < steps:
        for batch in loader:
            loss = loss_fn(model, batch) if loss_fn else model(**batch)["loss"]
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step == steps:
                break
    model.eval()
    state = get_peft_model_state_dict(model, adapter_name="target")
    model.unload()

    factors, _ = parse_state_dict(
        adapter_id, {k: v.detach().clone() for k, v in state.items()}, torch.float32
    )
    return LoraExpert(
        adapter_id,
        factors,
        scaling_from_config({"lora_alpha": lora_alpha}, r),
        {"r": r, "lora_alpha": lora_alpha},
    )
