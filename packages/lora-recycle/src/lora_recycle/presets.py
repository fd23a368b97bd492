"""The paper's variants as ready configurations (spec §2.2 table, §2.4 LoraHub)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from torch import nn

from lora_recycle.adapters import LoraExpert
from lora_recycle.lorahub import LoraHubResult, lorahub_optimize
from lora_recycle.model import AdaptiveMergeConfig


@dataclass(frozen=True)
class Preset:
    """A merge configuration with the learning rate the paper trained it with."""

    name: str
    config: AdaptiveMergeConfig
    lr: float


def _preset(name: str, lr: float, overrides: dict[str, Any], **fields: Any) -> Preset:
    lr = overrides.pop("lr", lr)
    return Preset(name, dataclasses.replace(AdaptiveMergeConfig(**fields), **overrides), lr)


def ours(**overrides: Any) -> Preset:
    """The paper's design-space winner: zero init (starts at the base), LeakyReLU, per module, lr 5e-2."""
    return _preset("ours", 5e-2, overrides, activation="leaky_relu", init="zeros")


def adamerging(**overrides: Any) -> Preset:
    """AdaMerging: identity activation, equal init 1/sqrt(K), per module, lr 5e-2."""
    return _preset("adamerging", 5e-2, overrides, activation="identity", init="equal")


def pi_tuning(**overrides: Any) -> Preset:
    """π-Tuning: softmax with a, b terms, equal init, trainable A/B, the target (first) expert re-drawn."""
    return _preset(
        "pi_tuning",
        1e-4,
        overrides,
        activation="softmax",
        init="equal",
        include_activation_coeff=True,
        train_lora_weights=True,
        reinit_target=True,
    )


@dataclass(frozen=True)
class LoraHubPreset:
    """Gradient-free LoraHub: NGOpt, weights in ±1.5, L1 0.05 on mean|w|."""

    budget: int = 100
    bounds: tuple[float, float] = (-1.5, 1.5)
    l1: float = 0.05
    seed: int = 42
    name: str = "lorahub"

    def run(
        self,
        base_model: nn.Module,
        experts: Sequence[LoraExpert],
        loss_fn: Callable[[nn.Module], float],
    ) -> LoraHubResult:
        return lorahub_optimize(
            base_model,
            experts,
            loss_fn,
            budget=self.budget,
            bounds=self.bounds,
            l1=self.l1,
            seed=self.seed,
        )


def lorahub(budget: int = 100, **overrides: Any) -> LoraHubPreset:
    return LoraHubPreset(budget=budget, **overrides)
