"""Neural fields (MLP+, SIREN, plain MLP) and LoRA adapters on their hidden linear layers.

Every model keeps its hidden ``nn.Linear`` layers in ``hidden_layers`` (an ``nn.ModuleList``): that is
where :func:`add_lora` puts adapters (the Fourier/input layer and the output layer never get one, as
in the official code). :class:`LoRALinear` *is* an ``nn.Linear`` (``isinstance`` holds, ``weight``
and ``bias`` keep their names), with ``y = x W^T + b + (x A) B``, ``A`` (in, r) He-uniform and ``B``
(r, out) zeros, so a fresh adapter leaves the output bit-identical.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, cast

import torch
from torch import nn
from torch.nn import functional as F

Tensor = torch.Tensor


class FourierFeatures(nn.Module):
    """``[cos(x B), sin(x B)]`` with a trainable ``B`` (in, F/2) drawn from ``N(0, scale^2)``."""

    def __init__(
        self, in_dim: int, fourier_dim: int, scale: float, generator: torch.Generator
    ) -> None:
        super().__init__()
        if fourier_dim < 2 or fourier_dim % 2:
            raise ValueError(f"fourier_dim must be an even integer >= 2, got {fourier_dim}")
        self.B = nn.Parameter(torch.randn(in_dim, fourier_dim // 2, generator=generator) * scale)

    def forward(self, x: Tensor) -> Tensor:
        z = x @ self.B
        return torch.cat([torch.cos(z), torch.sin(z)], dim=-1)


def _init_linear(layer: nn.Linear, generator: torch.Generator) -> nn.Linear:
    # flax nnx.Linear's defaults: lecun-normal kernel, zero bias (the official models' init).
    fan_in = layer.in_features
    with torch.no_grad():
        layer.weight.copy_(torch.randn(layer.weight.shape, generator=generator) / math.sqrt(fan_in))
        if layer.bias is not None:
            layer.bias.zero_()
    return layer


def _check_dims(**dims: int) -> None:
    for name, value in dims.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


class NeuralField(nn.Module):
    """Base: ``config`` holds the constructor arguments, so a store can rebuild the model."""

    hidden_layers: nn.ModuleList
    config: dict[str, Any]

    def hidden_parameter_names(self) -> list[str]:
        """Names of the hidden layers' parameters (the fp16 down-cast candidates)."""
        return [f"hidden_layers.{n}" for n, _ in self.hidden_layers.named_parameters()]


class MLPPlus(NeuralField):
    """MLP+: trainable Fourier features, then ``layers`` blocks ``SiLU(LayerNorm(Linear))``, then Linear."""

    def __init__(
        self,
        in_dim: int = 2,
        out_dim: int = 1,
        hidden: int = 64,
        layers: int = 5,
        fourier_dim: int = 128,
        fourier_scale: float = 7.0,
        seed: int = 0,
    ) -> None:
        super().__init__()
        _check_dims(in_dim=in_dim, out_dim=out_dim, hidden=hidden, layers=layers)
        self.config = dict(
            in_dim=in_dim,
            out_dim=out_dim,
            hidden=hidden,
            layers=layers,
            fourier_dim=fourier_dim,
            fourier_scale=fourier_scale,
            seed=seed,
        )
        g = torch.Generator().manual_seed(seed)
        self.fourier = FourierFeatures(in_dim, fourier_dim, fourier_scale, g)
        widths = [fourier_dim] + [hidden] * layers
        self.hidden_layers = nn.ModuleList(
            _init_linear(nn.Linear(a, b), g) for a, b in itertools.pairwise(widths)
        )
        self.norms = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(layers))
        self.out = _init_linear(nn.Linear(hidden, out_dim), g)

    def forward(self, x: Tensor) -> Tensor:
        h = self.fourier(x)
        for layer, norm in zip(self.hidden_layers, self.norms, strict=True):
            h = F.silu(norm(layer(h)))
        return self.out(h)


class MLP(NeuralField):
    """A plain MLP (no LayerNorm, no Fourier features) with SiLU activations."""

    def __init__(
        self, in_dim: int = 2, out_dim: int = 1, hidden: int = 64, layers: int = 3, seed: int = 0
    ) -> None:
        super().__init__()
        _check_dims(in_dim=in_dim, out_dim=out_dim, hidden=hidden, layers=layers)
        self.config = dict(in_dim=in_dim, out_dim=out_dim, hidden=hidden, layers=layers, seed=seed)
        g = torch.Generator().manual_seed(seed)
        self.inp = _init_linear(nn.Linear(in_dim, hidden), g)
        self.hidden_layers = nn.ModuleList(
            _init_linear(nn.Linear(hidden, hidden), g) for _ in range(layers - 1)
        )
        self.out = _init_linear(nn.Linear(hidden, out_dim), g)

    def forward(self, x: Tensor) -> Tensor:
        h = F.silu(self.inp(x))
        for layer in self.hidden_layers:
            h = F.silu(layer(h))
        return self.out(h)


class SIREN(NeuralField):
    """SIREN: ``sin(omega0 * Linear)`` layers, the first uniform ``+-1/in``, the rest ``+-sqrt(6/in)/omega0``."""

    def __init__(
        self,
        in_dim: int = 2,
        out_dim: int = 1,
        hidden: int = 64,
        layers: int = 3,
        omega0: float = 30.0,
        seed: int = 0,
    ) -> None:
        super().__init__()
        _check_dims(in_dim=in_dim, out_dim=out_dim, hidden=hidden, layers=layers)
        if not omega0 > 0:
            raise ValueError(f"omega0 must be > 0, got {omega0!r}")
        self.config = dict(
            in_dim=in_dim, out_dim=out_dim, hidden=hidden, layers=layers, omega0=omega0, seed=seed
        )
        self.omega0 = omega0
        g = torch.Generator().manual_seed(seed)
        self.inp = nn.Linear(in_dim, hidden)
        self.hidden_layers = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(layers - 1))
        self.out = nn.Linear(hidden, out_dim)
        with torch.no_grad():
            for i, layer in enumerate([self.inp, *self.hidden_layers, self.out]):
                bound = (
                    1.0 / layer.in_features
                    if i == 0
                    else math.sqrt(6.0 / layer.in_features) / omega0
                )
                layer.weight.copy_((torch.rand(layer.weight.shape, generator=g) * 2 - 1) * bound)
                layer.bias.copy_(
                    (torch.rand(layer.bias.shape, generator=g) * 2 - 1)
                    / math.sqrt(layer.in_features)
                )

    def forward(self, x: Tensor) -> Tensor:
        h = torch.sin(self.omega0 * self.inp(x))
        for layer in self.hidden_layers:
            h = torch.sin(self.omega0 * layer(h))
        return self.out(h)


MODELS: dict[str, type[NeuralField]] = {"MLPPlus": MLPPlus, "MLP": MLP, "SIREN": SIREN}


def build_model(name: str, config: dict[str, Any]) -> NeuralField:
    """Rebuild a model from its class name and ``config`` (what a snapshot store records)."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; expected one of {sorted(MODELS)}")
    return MODELS[name](**config)


# -- LoRA -------------------------------------------------------------------------------------------
class LoRALinear(nn.Linear):
    """An ``nn.Linear`` plus a rank-``r`` update ``(x A) B``; ``A`` He-uniform, ``B`` zero."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        rank: int,
        bias: bool = True,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__(in_features, out_features, bias=bias)
        if (
            isinstance(rank, bool)
            or not isinstance(rank, int)
            or not 1 <= rank <= min(in_features, out_features)
        ):
            raise ValueError(
                f"LoRA rank must be an integer in [1, min(in, out)] = [1, {min(in_features, out_features)}], got {rank!r}"
            )
        self.rank = rank
        bound = math.sqrt(6.0 / in_features)  # He-uniform on A's fan-in (flax's he_uniform)
        self.lora_a = nn.Parameter(
            (torch.rand(in_features, rank, generator=generator) * 2 - 1) * bound
        )
        self.lora_b = nn.Parameter(torch.zeros(rank, out_features))

    @classmethod
    def from_linear(
        cls, linear: nn.Linear, rank: int, generator: torch.Generator | None = None
    ) -> LoRALinear:
        """Wrap ``linear`` keeping its ``weight`` and ``bias`` Parameters (shared, not copied)."""
        layer = cls(
            linear.in_features,
            linear.out_features,
            rank,
            bias=linear.bias is not None,
            generator=generator,
        )
        layer.weight = linear.weight
        layer.bias = linear.bias
        return layer.to(device=linear.weight.device, dtype=linear.weight.dtype)

    def delta(self) -> Tensor:
        """The weight update ``(A B)^T`` in ``nn.Linear``'s (out, in) layout."""
        return (self.lora_a @ self.lora_b).T

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias) + (x @ self.lora_a) @ self.lora_b

    def to_linear(self, merge: bool) -> nn.Linear:
        """A plain ``nn.Linear`` with this layer's weights (``W += (A B)^T`` when ``merge``)."""
        linear = nn.Linear(self.in_features, self.out_features, bias=self.bias is not None)
        linear = linear.to(device=self.weight.device, dtype=self.weight.dtype)
        with torch.no_grad():
            linear.weight.copy_(self.weight + self.delta() if merge else self.weight)
            if self.bias is not None:
                linear.bias.copy_(self.bias)
        return linear


def has_lora(model: NeuralField) -> bool:
    return any(isinstance(layer, LoRALinear) for layer in model.hidden_layers)


def add_lora(model: NeuralField, rank: int, seed: int = 0) -> NeuralField:
    """Put a fresh LoRA adapter on every hidden linear layer (in place; returns ``model``)."""
    g = torch.Generator().manual_seed(seed)
    for i, layer in enumerate(model.hidden_layers):
        if isinstance(layer, LoRALinear):
            continue
        if not isinstance(layer, nn.Linear):
            raise TypeError(f"LoRA applies to nn.Linear hidden layers, got {type(layer).__name__}")
        model.hidden_layers[i] = LoRALinear.from_linear(layer, rank, generator=g)
    return model


def remove_lora(model: NeuralField, merge: bool = True) -> NeuralField:
    """Replace every adapter by a plain linear layer, merging ``A B`` into ``W`` when ``merge``."""
    if not has_lora(model):
        raise ValueError("the model has no LoRA adapters to remove")
    for i, layer in enumerate(model.hidden_layers):
        if isinstance(layer, LoRALinear):
            model.hidden_layers[i] = layer.to_linear(merge)
    return model


def lora_state(model: NeuralField) -> dict[str, Tensor]:
    """Only the LoRA factors, keyed as in ``model.state_dict()`` (a delta snapshot)."""
    return {k: v for k, v in model.state_dict().items() if k.endswith(("lora_a", "lora_b"))}


def hidden_linears(model: NeuralField) -> list[nn.Linear]:
    """The hidden layers, each an ``nn.Linear`` (a :class:`LoRALinear` is one)."""
    layers = list(model.hidden_layers)
    for layer in layers:
        if not isinstance(layer, nn.Linear):
            raise TypeError(f"hidden layers must be nn.Linear, got {type(layer).__name__}")
    return cast(list[nn.Linear], layers)


def apply_lora_state(model: NeuralField, state: dict[str, Tensor]) -> NeuralField:
    """Fold stored factors into a plain model: ``W += (A B)^T`` per hidden layer (in place)."""
    with torch.no_grad():
        for i, layer in enumerate(hidden_linears(model)):
            key = f"hidden_layers.{i}."
            if key + "lora_a" not in state:
                raise KeyError(f"no LoRA factors for {key[:-1]} in the delta snapshot")
            layer.weight.add_(
                (state[key + "lora_a"] @ state[key + "lora_b"]).T.to(layer.weight.dtype)
            )
    return model


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
