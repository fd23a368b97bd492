"""Feature maps ``y(x)`` of the adaptive controller, ``x = (q, q̇)``."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch
from torch import nn


class MLPFeatures(nn.Module):
    """``y(x) = tanh(W_L … tanh(W₁ x + b₁) … + b_L)``: hidden layers without an output layer.

    As in the base code the adapted matrix Â plays the output layer's role, so the feature count is
    ``hidden[-1]``. Weights start at N(0, ``init_std``²) (the base code uses 0.1).
    """

    def __init__(
        self,
        in_dim: int = 6,
        hidden: Sequence[int] = (32, 32),
        init_std: float = 0.1,
        seed: int | None = None,
    ):
        super().__init__()
        if not (isinstance(in_dim, int) and in_dim >= 1):
            raise ValueError(f"in_dim must be a positive integer (the state size), got {in_dim!r}")
        if not hidden or any(h < 1 for h in hidden):
            raise ValueError(f"hidden must be a non-empty list of positive widths, got {hidden}")
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        dims = [in_dim, *hidden]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(dims))
        # Drawn in float64 on the host whatever the default dtype and device: one seed gives the
        # same features everywhere (a loky worker starts with float32 as default, a float64
        # session must agree with it; the generator is a CPU one).
        with torch.no_grad():
            for layer in self.layers:
                for p in layer.parameters():  # weight, then bias
                    p.copy_(
                        torch.randn(p.shape, generator=gen, dtype=torch.float64, device="cpu")
                        * init_std
                    )
        self.in_dim = in_dim
        self.out_dim = dims[-1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.in_dim:
            raise ValueError(
                f"MLPFeatures(in_dim={self.in_dim}) got states with {x.shape[-1]} entries "
                f"(shape {tuple(x.shape)}): the state x = (q, q̇) must have {self.in_dim}"
            )
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


class ZeroFeatures(nn.Module):
    """``y ≡ 0``: the controller has nothing to adapt (the PID baseline)."""

    def __init__(self, out_dim: int = 1):
        super().__init__()
        self.out_dim = out_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.new_zeros(*x.shape[:-1], self.out_dim)
