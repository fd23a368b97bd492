"""``get_adaptive_merge_model``: wrap a base model so each target linear layer merges the pool adaptively.

The wrapper is PeftModel-like: it forwards calls to the base model, only the coefficients (and, for
π-Tuning, the factors) train, and it exports the learned merge as a merged checkpoint
(:meth:`AdaptiveMergeModel.merge_and_unload`) or a plain PEFT LoRA (:meth:`AdaptiveMergeModel.to_lora`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from lora_recycle.adapters import LoraExpert
from lora_recycle.controls import REINIT_CASES, reinit_experts, reinit_target
from lora_recycle.export import ExportedLora, export_lora
from lora_recycle.layer import (
    INITS,
    AdaptiveMergeLinear,
    CoefficientGroup,
    canonical_activation,
    initial_logits,
)
from lora_recycle.pool import LoraPool, get_linear, unwrap_base

GRANULARITIES = ("per_expert", "per_layer", "per_sublayer", "per_module", "per_dimension")
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
_AFFINE_ACTIVATIONS = ("softmax", "sigmoid")


@dataclass
class AdaptiveMergeConfig:
    """How the pool is merged (spec §2.2); the presets in :mod:`lora_recycle.presets` fill it in.

    ``include_activation_coeff`` adds the learnable ``a`` (init 1), ``b`` (init 0) of
    ``c = a·act(w) + b`` (softmax/sigmoid only). ``reinit`` is the random-parameter control,
    ``reinit_target`` π-Tuning's fresh target (first expert), ``force_routing`` the first expert's
    logit under ``init="target"``. ``backend`` picks torch or the triton kernel.
    """

    granularity: str = "per_module"
    activation: str = "leaky_relu"
    init: str = "zeros"
    include_activation_coeff: bool = False
    train_lora_weights: bool = False
    reinit: str | None = None
    reinit_target: bool = False
    force_routing: float = 0.0
    seed: int = 0
    backend: str = "auto"

    def __post_init__(self) -> None:
        if self.granularity not in GRANULARITIES:
            raise ValueError(
                f"granularity must be one of {GRANULARITIES}, got {self.granularity!r}"
            )
        self.activation = canonical_activation(self.activation)
        if self.init not in INITS:
            raise ValueError(f"init must be one of {INITS}, got {self.init!r}")
        if self.reinit is not None and self.reinit not in REINIT_CASES:
            raise ValueError(f"reinit must be None or one of {REINIT_CASES}, got {self.reinit!r}")
        if self.include_activation_coeff and self.activation not in _AFFINE_ACTIVATIONS:
            raise ValueError(
                f"include_activation_coeff needs activation in {_AFFINE_ACTIVATIONS}, got {self.activation!r}"
            )


def group_key(module: str, granularity: str) -> str:
    """Which coefficient group ``module`` belongs to (modules outside ``layers.{i}`` stand alone)."""
    if granularity == "per_expert":
        return "all"
    layer = _LAYER.search(module)
    if granularity in ("per_module", "per_dimension") or layer is None:
        return module
    if granularity == "per_layer":
        return f"layers.{layer.group(1)}"
    parts = module.split(".")
    sub = "self_attn" if any("attn" in p for p in parts) else "mlp" if "mlp" in parts else parts[-2]
    return f"layers.{layer.group(1)}.{sub}"


def _prepare_experts(pool: LoraPool, config: AdaptiveMergeConfig) -> list[LoraExpert]:
    experts = list(pool)
    if config.reinit is not None:
        experts = reinit_experts(experts, config.reinit, seed=config.seed)
    if config.reinit_target:
        experts[0] = reinit_target(experts[0], seed=config.seed)
    return experts


def _concatenate(experts: list[LoraExpert], module: str) -> tuple[torch.Tensor, ...]:
    """``A_cat``, ``B_cat``, the owning expert of each rank row and its scaling."""
    a_parts, b_parts, owner, scale = [], [], [], []
    for i, expert in enumerate(experts):
        if module not in expert.factors:
            continue  # an empty range for an expert that lacks this module
        a, b = expert.factors[module]
        a_parts.append(a)
        b_parts.append(b)
        owner += [i] * a.shape[0]
        scale += [expert.scaling] * a.shape[0]
    dtype = a_parts[0].dtype
    return (
        torch.cat(a_parts).clone(),
        torch.cat(b_parts, dim=1).clone(),
        torch.tensor(owner, dtype=torch.long),
        torch.tensor(scale, dtype=dtype),
    )


class AdaptiveMergeModel(nn.Module):
    """The base model with :class:`AdaptiveMergeLinear` layers; calls go to the base model."""

    def __init__(self, base_model: nn.Module, pool: LoraPool, config: AdaptiveMergeConfig) -> None:
        super().__init__()
        if len(pool) == 0:
            raise ValueError("cannot merge an empty pool")
        self.base_model = base_model
        self.merge_config = config
        self.expert_ids = pool.ids
        experts = _prepare_experts(pool, config)
        for p in base_model.parameters():
            p.requires_grad_(False)
        generator = torch.Generator().manual_seed(config.seed)
        self.coefficient_groups = nn.ModuleDict()
        self.module_groups: dict[str, str] = {}
        for module in pool.modules:
            a_cat, b_cat, owner, scale = _concatenate(experts, module)
            key = group_key(module, config.granularity)
            safe = key.replace(".", "__")
            if safe not in self.coefficient_groups:
                size = a_cat.shape[0] if config.granularity == "per_dimension" else len(experts)
                logits = initial_logits(
                    config.init, size, len(experts), generator, config.force_routing
                )
                self.coefficient_groups[safe] = CoefficientGroup(
                    logits.to(a_cat.dtype), config.activation, config.include_activation_coeff
                )
            self.module_groups[module] = safe
            base_linear = get_linear(base_model, module)
            layer = AdaptiveMergeLinear(
                base_linear,
                a_cat,
                b_cat,
                owner,
                scale,
                self.coefficient_groups[safe],  # type: ignore[arg-type]
                per_dimension=config.granularity == "per_dimension",
                trainable_factors=config.train_lora_weights,
                backend=config.backend,
            ).to(base_linear.weight.device)
            _replace(base_model, module, layer)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.base_model(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == "base_model":
                raise
            return getattr(self.base_model, name)

    # -- inspection ----------------------------------------------------------------------------
    def adaptive_layers(self) -> Iterator[tuple[str, AdaptiveMergeLinear]]:
        for module in self.module_groups:
            layer = self.base_model.get_submodule(module)
            assert isinstance(layer, AdaptiveMergeLinear)
            yield module, layer

    def coefficients(self) -> dict[str, torch.Tensor]:
        """``{module: c}``: the activated coefficients (per expert, or per rank row) of each module."""
        return {
            module: self.coefficient_groups[key]().detach().clone()
            for module, key in self.module_groups.items()
        }

    def get_nb_trainable_parameters(self) -> tuple[int, int]:
        """``(trainable, all)`` parameter counts, as peft's method of that name."""
        params = list(self.parameters())
        return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)

    def delta_weights(self) -> dict[str, torch.Tensor]:
        """``{module: ΔW}`` of the current merge."""
        with torch.no_grad():
            return {module: layer.delta_weight() for module, layer in self.adaptive_layers()}

    # -- export --------------------------------------------------------------------------------
    def merge_and_unload(self) -> nn.Module:
        """Fold each module's ΔW into its base weight and return the plain base model."""
        with torch.no_grad():
            for module, layer in list(self.adaptive_layers()):
                base = layer.base
                base.weight += layer.delta_weight().to(base.weight.dtype)
                _replace(self.base_model, module, base)
        self.module_groups = {}
        return self.base_model

    def to_lora(self, rank: int | None = None) -> ExportedLora:
        """The learned merge as a plain PEFT LoRA: the concatenated scaled factors (zero-padded to
        one rank), or a rank-``rank`` truncated SVD of each ΔW."""
        with torch.no_grad():
            parts = {
                module: (
                    layer.lora_A.detach(),
                    layer.lora_B.detach() * layer.row_coefficients()[None, :],
                )
                for module, layer in self.adaptive_layers()
            }
        return export_lora(parts, rank)

    def save_pretrained(self, save_directory: str | Path, rank: int | None = None) -> Path:
        """Save the learned merge as a PEFT adapter folder (``to_lora(rank)``), as peft's
        ``PeftModel.save_pretrained`` saves the adapter and not the base; load it with
        ``PeftModel.from_pretrained(base, folder)``. For a full checkpoint, ``merge_and_unload()``
        then the base model's own ``save_pretrained``."""
        # Defined here: __getattr__ would otherwise forward to the base model's save_pretrained,
        # which writes the wrapped layers' state dict under names no loader reads (review o10).
        return self.to_lora(rank).save_pretrained(save_directory)


def _replace(model: nn.Module, name: str, new: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, new)


def get_adaptive_merge_model(
    base_model: nn.Module, pool: LoraPool, config: AdaptiveMergeConfig | None = None
) -> AdaptiveMergeModel:
    """Wrap ``base_model`` (modified in place, as peft's ``get_peft_model`` does) to merge ``pool``."""
    return AdaptiveMergeModel(unwrap_base(base_model), pool, config or AdaptiveMergeConfig())
