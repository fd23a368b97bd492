"""Spiking-transformer building blocks in pure torch (spikingjelly and cupy never required).

Tensors are multi-step, ``[T, B, ...]`` (time first), as spikingjelly's ``step_mode="m"``.

- :class:`LIF`: the leaky integrate-and-fire neuron of spikingjelly's ``LIFNode``. Charge
  ``H[t] = V[t−1] + (X[t] − (V[t−1] − V_reset))/τ`` (``decay_input=True``; else
  ``V[t−1] − (V[t−1] − V_reset)/τ + X[t]``), fire ``S[t] = Θ(H[t] − V_th)``, reset hard
  ``V[t] = H[t](1 − S[t]) + V_reset·S[t]`` or soft (``v_reset=None``) ``V[t] = H[t] − V_th·S[t]``.
  The membrane starts at ``V_reset`` (0 for soft reset) in every forward, on the input's device and
  dtype: no state leaks between batches, and nothing needs resetting (the commonest spikingjelly bug).
- Surrogate gradients for Θ: :class:`SigmoidSurrogate` ``α·σ(αx)(1 − σ(αx))`` (α = 4) and
  :class:`ATanSurrogate` ``(α/2) / (1 + (π α x / 2)²)`` (α = 2), as spikingjelly's defaults.
- :class:`SpikingSelfAttention` (Spikformer's SSA, no softmax), :class:`QKTokenAttention` (QKFormer's
  token attention), and :class:`TinySpikformer`, the test model of the reproduction.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

# -- surrogate spike functions ----------------------------------------------------------------


class _SurrogateSpike(torch.autograd.Function):
    """Heaviside forward, ``grad_fn(x, α)`` backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, alpha: float, kind: str) -> torch.Tensor:
        ctx.save_for_backward(x)
        ctx.alpha, ctx.kind = alpha, kind
        return (x >= 0).to(x.dtype)

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (x,) = ctx.saved_tensors
        fn = sigmoid_surrogate_grad if ctx.kind == "sigmoid" else atan_surrogate_grad
        return grad_out * fn(x, ctx.alpha), None, None


def sigmoid_surrogate_grad(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """``d/dx σ(αx) = α·σ(αx)(1 − σ(αx))``."""
    s = torch.sigmoid(alpha * x)
    return alpha * s * (1 - s)


def atan_surrogate_grad(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """``d/dx [atan(π α x / 2)/π + 1/2] = (α/2) / (1 + (π α x / 2)²)``."""
    return (alpha / 2) / (1 + (math.pi / 2 * alpha * x).square())


class SigmoidSurrogate(nn.Module):
    """Θ(x) forward, the derivative of ``σ(αx)`` backward (spikingjelly's ``surrogate.Sigmoid``)."""

    kind = "sigmoid"

    def __init__(self, alpha: float = 4.0) -> None:
        super().__init__()
        if not alpha > 0:
            raise ValueError(f"alpha must be > 0, got {alpha}")
        self.alpha = alpha

    def primitive(self, x: torch.Tensor) -> torch.Tensor:
        """The smooth function whose derivative the backward pass uses."""
        return torch.sigmoid(self.alpha * x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _SurrogateSpike.apply(x, self.alpha, self.kind)


class ATanSurrogate(SigmoidSurrogate):
    """Θ(x) forward, the derivative of ``atan(παx/2)/π + 1/2`` backward (``surrogate.ATan``)."""

    kind = "atan"

    def __init__(self, alpha: float = 2.0) -> None:
        super().__init__(alpha)

    def primitive(self, x: torch.Tensor) -> torch.Tensor:
        return torch.atan(math.pi / 2 * self.alpha * x) / math.pi + 0.5


# -- the neuron -------------------------------------------------------------------------------


class LIF(nn.Module):
    """Multi-step leaky integrate-and-fire neuron over ``x`` of shape ``[T, B, ...]``.

    Args:
        tau: membrane time constant (> 1 keeps the decay in (0, 1)).
        v_threshold: firing threshold; must exceed ``v_reset``.
        v_reset: reset potential (hard reset), or ``None`` for a soft reset (subtract ``v_threshold``).
        decay_input: whether the input is divided by ``tau`` too (spikingjelly's default).
        detach_reset: cut the gradient through the reset term (the official QKFormer setting).
        surrogate: the spike function; :class:`SigmoidSurrogate` (α = 4) by default.
        time_steps: if given, inputs must have exactly this many steps in dim 0 (catches a batch
            passed without its time dimension).
    """

    def __init__(
        self,
        tau: float = 2.0,
        v_threshold: float = 1.0,
        v_reset: float | None = 0.0,
        *,
        decay_input: bool = True,
        detach_reset: bool = True,
        surrogate: nn.Module | None = None,
        time_steps: int | None = None,
    ) -> None:
        super().__init__()
        if not tau > 0:
            raise ValueError(f"tau must be > 0, got {tau}")
        if v_reset is not None and not v_threshold > v_reset:
            raise ValueError(
                f"v_threshold must be > v_reset, got v_threshold={v_threshold}, v_reset={v_reset}"
            )
        if time_steps is not None and time_steps < 1:
            raise ValueError(f"time_steps must be >= 1, got {time_steps}")
        self.tau, self.v_threshold, self.v_reset = tau, v_threshold, v_reset
        self.decay_input, self.detach_reset = decay_input, detach_reset
        self.surrogate = surrogate if surrogate is not None else SigmoidSurrogate()
        self.time_steps = time_steps

    def extra_repr(self) -> str:
        return (
            f"tau={self.tau}, v_threshold={self.v_threshold}, v_reset={self.v_reset}, "
            f"detach_reset={self.detach_reset}"
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim < 2:
            raise ValueError(
                f"LIF takes multi-step input [T, B, ...] with a time dimension first; got shape "
                f"{tuple(x.shape)}"
            )
        if self.time_steps is not None and x.shape[0] != self.time_steps:
            raise ValueError(
                f"LIF expects {self.time_steps} time steps in dim 0, got shape {tuple(x.shape)}; "
                "repeat a static input over time first (x.unsqueeze(0).repeat(T, 1, ...))"
            )
        v_reset = 0.0 if self.v_reset is None else self.v_reset
        v = torch.full_like(x[0], v_reset)  # fresh state on x's device and dtype, every forward
        spikes = []
        for x_t in x:
            if self.decay_input:
                h = v + (x_t - (v - v_reset)) / self.tau
            else:
                h = v - (v - v_reset) / self.tau + x_t
            s = self.surrogate(h - self.v_threshold)
            s_reset = s.detach() if self.detach_reset else s
            if self.v_reset is None:
                v = h - self.v_threshold * s_reset
            else:
                v = h * (1 - s_reset) + self.v_reset * s_reset
            spikes.append(s)
        return torch.stack(spikes)


def reset_net(module: nn.Module) -> None:
    """Call ``reset()`` on every submodule that has one (spikingjelly's ``functional.reset_net``).

    Our :class:`LIF` keeps no state between forwards, so it needs none; this is for models that mix
    in stateful neurons from another library.
    """
    for m in module.modules():
        reset = getattr(m, "reset", None)
        if callable(reset):
            reset()


# -- transformer blocks -------------------------------------------------------------------------


class _LinearBN(nn.Module):
    """Linear then BatchNorm1d over all leading dims ([T, B, N, C] → normalise C)."""

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.linear = nn.Linear(d_in, d_out)
        self.bn = nn.BatchNorm1d(d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        return self.bn(y.flatten(0, -2)).view_as(y)


class _SpikingLinear(nn.Module):
    """LIF(BN(Linear(x))): the unit of every Spikformer projection."""

    def __init__(self, d_in: int, d_out: int, v_threshold: float = 1.0, **lif: Any) -> None:
        super().__init__()
        self.proj = _LinearBN(d_in, d_out)
        self.lif = LIF(v_threshold=v_threshold, **lif)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lif(self.proj(x))


class SpikingSelfAttention(nn.Module):
    """Spikformer's SSA: spike Q, K, V, ``(Q Kᵀ) V · scale`` without softmax, LIF(0.5), projection."""

    def __init__(self, dim: int, heads: int = 4, scale: float = 0.125, **lif: Any) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim ({dim}) must be divisible by heads ({heads})")
        self.heads, self.scale = heads, scale
        self.q, self.k, self.v = (_SpikingLinear(dim, dim, **lif) for _ in range(3))
        self.attn_lif = LIF(v_threshold=0.5, **lif)
        self.out = _SpikingLinear(dim, dim, **lif)

    def _split(self, x: torch.Tensor) -> torch.Tensor:  # [T, B, N, C] → [T, B, H, N, C/H]
        t, b, n, c = x.shape
        return x.view(t, b, n, self.heads, c // self.heads).transpose(2, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._split(self.q(x)), self._split(self.k(x)), self._split(self.v(x))
        y = (q @ k.transpose(-2, -1)) @ v * self.scale
        y = y.transpose(2, 3).flatten(-2)
        return self.out(self.attn_lif(y))


class QKTokenAttention(nn.Module):
    """QKFormer's token attention: per head, Q spikes summed over channels → LIF(0.5) → mask of K."""

    def __init__(self, dim: int, heads: int = 4, **lif: Any) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim ({dim}) must be divisible by heads ({heads})")
        self.heads = heads
        self.q, self.k = _SpikingLinear(dim, dim, **lif), _SpikingLinear(dim, dim, **lif)
        self.token_lif = LIF(v_threshold=0.5, **lif)
        self.out = _SpikingLinear(dim, dim, **lif)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t, b, n, c = x.shape
        q = self.q(x).view(t, b, n, self.heads, c // self.heads)
        k = self.k(x).view(t, b, n, self.heads, c // self.heads)
        mask = self.token_lif(q.sum(-1, keepdim=True))  # [T, B, N, H, 1]: which tokens attend
        return self.out((mask * k).flatten(-2))


class SpikformerBlock(nn.Module):
    """``x + attention(x)`` then ``x + MLP(x)``, the MLP two LIF(BN(Linear)) layers."""

    def __init__(
        self, dim: int, heads: int = 4, mlp_ratio: int = 4, attention: str = "ssa"
    ) -> None:
        super().__init__()
        if attention not in ("ssa", "qk"):
            raise ValueError(f"attention must be 'ssa' or 'qk', got {attention!r}")
        self.attn = (
            SpikingSelfAttention(dim, heads) if attention == "ssa" else QKTokenAttention(dim, heads)
        )
        self.mlp = nn.Sequential(
            _SpikingLinear(dim, dim * mlp_ratio), _SpikingLinear(dim * mlp_ratio, dim)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(x)
        return x + self.mlp(x)


class TinySpikformer(nn.Module):
    """A one-block spiking transformer over token sequences, direct-encoded over ``time_steps``.

    Input ``[B, N, patch_dim]`` (static tokens, repeated over T inside) or ``[T, B, N, patch_dim]``
    (event frames); output logits ``[B, num_classes]`` (mean over time and tokens, then Linear).
    Embedding ``LIF(BN(Linear(patch)))`` plus a learned position; then ``depth`` Spikformer blocks.
    """

    def __init__(
        self,
        patch_dim: int = 4,
        num_tokens: int = 16,
        num_classes: int = 10,
        dim: int = 64,
        heads: int = 4,
        mlp_ratio: int = 4,
        depth: int = 1,
        time_steps: int = 4,
        attention: str = "ssa",
    ) -> None:
        super().__init__()
        self.time_steps, self.num_tokens, self.patch_dim = time_steps, num_tokens, patch_dim
        self.embed = _SpikingLinear(patch_dim, dim)
        self.pos = nn.Parameter(torch.zeros(num_tokens, dim))
        nn.init.trunc_normal_(self.pos, std=0.02)
        self.blocks = nn.Sequential(
            *(SpikformerBlock(dim, heads, mlp_ratio, attention) for _ in range(depth))
        )
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim == 3:
            x = x.unsqueeze(0).expand(self.time_steps, *x.shape)
        if x.ndim != 4 or x.shape[-2:] != (self.num_tokens, self.patch_dim):
            raise ValueError(
                f"TinySpikformer takes [B, {self.num_tokens}, {self.patch_dim}] or "
                f"[T, B, {self.num_tokens}, {self.patch_dim}], got shape {tuple(x.shape)}"
            )
        h = self.blocks(self.embed(x) + self.pos)
        return self.head(h.mean(dim=(0, 2)))


def digits_to_tokens(images: torch.Tensor, patch: int = 2) -> torch.Tensor:
    """``[B, 8, 8]`` images → ``[B, (8/patch)², patch²]`` non-overlapping patch tokens."""
    b, h, w = images.shape
    if h % patch or w % patch:
        raise ValueError(f"image size {h}x{w} is not divisible by patch {patch}")
    x = images.view(b, h // patch, patch, w // patch, patch).permute(0, 1, 3, 2, 4)
    return x.reshape(b, (h // patch) * (w // patch), patch * patch)
