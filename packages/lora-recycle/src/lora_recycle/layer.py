"""The adaptive merge layer: ``y = W x + B_cat · diag(m) · A_cat · x`` with ``m = c(w) · s`` (spec §2.2).

All experts of a module are concatenated along the rank axis (``R = Σ r_i``), so the forward pass is
two GEMMs however many experts there are, and experts of different ranks sit side by side. ``w`` lives
in a :class:`CoefficientGroup` that several layers may share (the granularity).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from lora_recycle.kernels import lora_cat_forward

ACTIVATIONS = ("leaky_relu", "identity", "softmax", "sigmoid", "squared")
INITS = ("zeros", "ones", "equal", "uniform", "normal", "target")
LEAKY_SLOPE = 0.01  # upstream's nn.LeakyReLU default
NORMAL_INIT_STD = 0.5


def canonical_activation(name: str) -> str:
    """The activation's name; upstream's README passes ``linear`` where its code wants identity."""
    if name in ("linear", "real_linear"):
        if name == "linear":
            warnings.warn(
                "activation='linear' is taken as 'identity' (upstream's README says 'linear', its "
                "layer only accepts 'real_linear')",
                stacklevel=3,
            )
        return "identity"
    if name not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS} (or 'linear'), got {name!r}")
    return name


def activate(w: torch.Tensor, activation: str) -> torch.Tensor:
    """``act(w)`` over the last axis (softmax normalises across experts)."""
    functions: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "leaky_relu": lambda t: F.leaky_relu(t, LEAKY_SLOPE),
        "identity": lambda t: t,
        "softmax": lambda t: torch.softmax(t, dim=-1),
        "sigmoid": torch.sigmoid,
        "squared": torch.square,
    }
    return functions[activation](w)


def initial_logits(
    init: str, size: int, n_experts: int, generator: torch.Generator, force_routing: float = 0.0
) -> torch.Tensor:
    """Initial ``w`` (spec §2.2 table): zeros, ones, equal ``1/sqrt(K)``, U(0,1), N(0, 0.5²), target."""
    if init == "zeros":
        return torch.zeros(size)
    if init == "ones":
        return torch.ones(size)
    if init == "equal":
        return torch.full((size,), 1.0 / math.sqrt(n_experts))
    if init == "uniform":
        return torch.rand(size, generator=generator)
    if init == "normal":
        return torch.randn(size, generator=generator) * NORMAL_INIT_STD
    if init == "target":  # the first (target) expert gets force_routing, the others 0
        w = torch.zeros(size)
        w[0] = force_routing
        return w
    raise ValueError(f"init must be one of {INITS}, got {init!r}")


class CoefficientGroup(nn.Module):
    """The learnable logits ``w`` (and optional ``a``, ``b``) shared by one group of modules."""

    def __init__(self, logits: torch.Tensor, activation: str, affine: bool) -> None:
        super().__init__()
        self.activation = activation
        self.w = nn.Parameter(logits.clone())
        self.affine = affine
        if affine:
            self.a = nn.Parameter(torch.ones_like(logits))
            self.b = nn.Parameter(torch.zeros_like(logits))

    def forward(self) -> torch.Tensor:
        c = activate(self.w, self.activation)
        return self.a * c + self.b if self.affine else c


class AdaptiveMergeLinear(nn.Module):
    """A frozen ``nn.Linear`` plus the concatenated experts that act on it.

    ``expert_index[j]`` is the expert owning rank row ``j`` of ``A_cat``; ``row_scaling[j]`` its
    ``s_i``. With a per-dimension group, ``w`` has one entry per rank row instead of per expert.
    """

    def __init__(
        self,
        base: nn.Linear,
        a_cat: torch.Tensor,
        b_cat: torch.Tensor,
        expert_index: torch.Tensor,
        row_scaling: torch.Tensor,
        group: CoefficientGroup,
        *,
        per_dimension: bool,
        trainable_factors: bool,
        backend: str = "auto",
    ) -> None:
        super().__init__()
        self.base = base
        for p in base.parameters():
            p.requires_grad_(False)
        if trainable_factors:
            self.lora_A = nn.Parameter(a_cat)
            self.lora_B = nn.Parameter(b_cat)
        else:
            self.register_buffer("lora_A", a_cat)
            self.register_buffer("lora_B", b_cat)
        self.register_buffer("expert_index", expert_index)
        self.register_buffer("row_scaling", row_scaling)
        # Not a submodule: groups are owned (and registered once) by the wrapping model.
        self._group = [group]
        self.per_dimension = per_dimension
        self.backend = backend

    @property
    def in_features(self) -> int:
        return self.base.in_features

    @property
    def out_features(self) -> int:
        return self.base.out_features

    @property
    def weight(self) -> torch.Tensor:
        return self.base.weight

    def row_coefficients(self) -> torch.Tensor:
        """``m`` (length R): the coefficient of each rank row times its expert's scaling."""
        c = self._group[0]()
        per_row = c if self.per_dimension else c[self.expert_index]
        return per_row * self.row_scaling

    def delta_weight(self) -> torch.Tensor:
        """ΔW = B_cat diag(m) A_cat (forms the out×in matrix: for merging, not for the forward)."""
        m = self.row_coefficients()
        return self.lora_B @ (m[:, None] * self.lora_A)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.base(x)
        if self.lora_A.shape[0] == 0:
            return y
        m = self.row_coefficients().to(x.dtype)
        return y + lora_cat_forward(
            x, self.lora_A.to(x.dtype), m, self.lora_B.to(x.dtype), backend=self.backend
        )

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, R={self.lora_A.shape[0]}"
