"""A reference executor: a random-init Qwen3-shaped torch model with a static KV cache, chunked
prefill, and DuetServe's decode window.

The window is the paper's interruption-free decode: each decode gets ``k`` KV slots up front and
``k`` steps run back to back with the greedy next token fed on the device, so the host never waits
on a token inside the window; stop checks run once at its end, and tokens generated after a stop
are counted as wasted. On CUDA the decode step is captured once as a CUDA graph per batch size and
replayed ``k`` times (positions advance on the device); on CPU it runs eagerly. :meth:`spatial_step`
runs a window on a decode stream and a prefill on a prefill stream (two green-context partitions
from :class:`~duetserve.partition.SMPartitioner`), or one after the other without them.

This is what spatial mode runs on: vLLM's model runner cannot split one step over two streams
without a fork (see the README).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Sequence
from typing import Any, cast

try:
    import torch
    from torch import nn
except ModuleNotFoundError as e:  # torch is optional: only the reference executor needs it
    raise ModuleNotFoundError(
        "duetserve.executor needs PyTorch: pip install torch (or pip install 'duetserve[test]', "
        "which includes it)"
    ) from e

from duetserve.scheduler import LookaheadReducedWarning
from duetserve.shapes import ModelShape


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    var = x.float().pow(2).mean(-1, keepdim=True)
    return (x.float() * torch.rsqrt(var + eps)).to(x.dtype) * weight


def _rope(x: torch.Tensor, pos: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotate-half RoPE (Llama/Qwen layout); ``x`` is ``(..., seq, heads, d_head)``, ``pos``
    ``(..., seq)``."""
    d = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    ang = pos.to(torch.float32)[..., None] * inv  # (..., seq, d/2)
    cos = torch.cat([ang.cos(), ang.cos()], -1)[..., None, :].to(x.dtype)
    sin = torch.cat([ang.sin(), ang.sin()], -1)[..., None, :].to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class _Layer(nn.Module):
    """One decoder layer's weights; the model's forward runs every layer in one loop."""

    ln1: nn.Parameter
    ln2: nn.Parameter
    q_norm: nn.Parameter
    k_norm: nn.Parameter
    wq: nn.Parameter
    wk: nn.Parameter
    wv: nn.Parameter
    wo: nn.Parameter
    w_gate: nn.Parameter
    w_up: nn.Parameter
    w_down: nn.Parameter


class TinyQwen3(nn.Module):
    """Qwen3's block (GQA with q/k RMSNorm, RoPE, SwiGLU), random init, any :class:`ModelShape`.

    Attention reads a static KV cache ``(layers, slots, max_len, kv_heads, d_head)`` that the
    :class:`ReferenceExecutor` owns.
    """

    def __init__(self, shape: ModelShape, *, rope_theta: float = 1e6, seed: int = 0) -> None:
        super().__init__()
        if shape.tp != 1:
            raise ValueError(
                f"the reference model runs on one device: tp must be 1, got {shape.tp}"
            )
        self.shape = shape
        self.rope_theta = rope_theta
        g = torch.Generator().manual_seed(seed)
        s = shape

        def w(*size: int) -> nn.Parameter:
            return nn.Parameter(torch.randn(*size, generator=g) / math.sqrt(size[-1]))

        self.embed = w(s.vocab, s.d_model)
        self.lm_head = w(s.vocab, s.d_model)
        self.norm = nn.Parameter(torch.ones(s.d_model))
        self.layers = nn.ModuleList()
        for _ in range(s.n_layers):
            layer = _Layer()
            layer.ln1 = nn.Parameter(torch.ones(s.d_model))
            layer.ln2 = nn.Parameter(torch.ones(s.d_model))
            layer.q_norm = nn.Parameter(torch.ones(s.d_head))
            layer.k_norm = nn.Parameter(torch.ones(s.d_head))
            layer.wq = w(s.n_heads * s.d_head, s.d_model)
            layer.wk = w(s.n_kv_heads * s.d_head, s.d_model)
            layer.wv = w(s.n_kv_heads * s.d_head, s.d_model)
            layer.wo = w(s.d_model, s.n_heads * s.d_head)
            layer.w_gate = w(s.d_ff, s.d_model)
            layer.w_up = w(s.d_ff, s.d_model)
            layer.w_down = w(s.d_model, s.d_ff)
            self.layers.append(layer)

    def forward(
        self,
        tokens: torch.Tensor,
        pos: torch.Tensor,
        slots: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
    ) -> torch.Tensor:
        """Logits of the last position of each row. ``tokens``/``pos``: ``(b, q)`` new tokens and
        their positions (contiguous per row); ``slots``: ``(b,)`` cache rows. Writes the new K/V."""
        s = self.shape
        b, q = tokens.shape
        x = self.embed[tokens]  # (b, q, d)
        max_len = k_cache.shape[2]
        keys = torch.arange(max_len, device=tokens.device)
        # causal over the cache: query at position p sees keys 0..p
        mask = keys[None, None, :] <= pos[:, :, None]  # (b, q, max_len)
        rep = s.n_heads // s.n_kv_heads
        for li, module in enumerate(self.layers):
            layer = cast(_Layer, module)
            h = _rms_norm(x, layer.ln1)
            qh = _rms_norm((h @ layer.wq.T).view(b, q, s.n_heads, s.d_head), layer.q_norm)
            kh = _rms_norm((h @ layer.wk.T).view(b, q, s.n_kv_heads, s.d_head), layer.k_norm)
            vh = (h @ layer.wv.T).view(b, q, s.n_kv_heads, s.d_head)
            qh, kh = _rope(qh, pos, self.rope_theta), _rope(kh, pos, self.rope_theta)
            k_cache[li, slots[:, None], pos] = kh
            v_cache[li, slots[:, None], pos] = vh
            kc = k_cache[li, slots].repeat_interleave(rep, dim=2)  # (b, max_len, h, dh)
            vc = v_cache[li, slots].repeat_interleave(rep, dim=2)
            scores = torch.einsum("bqhd,bkhd->bhqk", qh, kc) / math.sqrt(s.d_head)
            scores = scores.masked_fill(~mask[:, None], float("-inf"))
            att = torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), vc)
            x = x + att.reshape(b, q, -1) @ layer.wo.T
            h = _rms_norm(x, layer.ln2)
            x = x + (nn.functional.silu(h @ layer.w_gate.T) * (h @ layer.w_up.T)) @ layer.w_down.T
        return _rms_norm(x[:, -1], self.norm) @ self.lm_head.T


@dataclasses.dataclass
class WindowResult:
    """Tokens of a decode window ``(n, k)``, how many of each row are useful (before and including
    a stop, within the request's remaining budget), and the wasted count."""

    tokens: torch.Tensor
    useful: list[int]
    wasted: int
    lookahead: int


class ReferenceExecutor:
    """Runs prefill chunks and decode windows of :class:`TinyQwen3` over a static KV cache.

    ``max_seqs`` cache rows of ``max_len`` positions each; callers give every request a row
    (``slot``). ``use_cuda_graphs`` (CUDA only) captures the decode step per batch size.
    """

    def __init__(
        self,
        model: TinyQwen3,
        max_seqs: int,
        max_len: int,
        *,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
        use_cuda_graphs: bool = False,
    ) -> None:
        if max_seqs <= 0 or max_len <= 0:
            raise ValueError(f"max_seqs and max_len must be > 0, got {max_seqs}, {max_len}")
        self.device = torch.device(device)
        if use_cuda_graphs and self.device.type != "cuda":
            raise ValueError("use_cuda_graphs needs a CUDA device")
        self.model = model.to(device=self.device, dtype=dtype).eval()
        s = model.shape
        size = (s.n_layers, max_seqs, max_len, s.n_kv_heads, s.d_head)
        self.k_cache = torch.zeros(size, device=self.device, dtype=dtype)
        self.v_cache = torch.zeros(size, device=self.device, dtype=dtype)
        self.max_len = max_len
        self.use_cuda_graphs = use_cuda_graphs
        self._graphs: dict[int, tuple[Any, dict[str, torch.Tensor]]] = {}

    @torch.no_grad()
    def prefill(self, slot: int, tokens: Sequence[int], start: int = 0) -> torch.Tensor:
        """Run one prefill chunk of ``tokens`` at positions ``start..``; the last position's logits."""
        if start + len(tokens) > self.max_len:
            raise ValueError(
                f"positions {start}..{start + len(tokens) - 1} exceed max_len {self.max_len}"
            )
        t = torch.tensor([list(tokens)], device=self.device)
        pos = torch.arange(start, start + len(tokens), device=self.device)[None]
        slots = torch.tensor([slot], device=self.device)
        return self.model(t, pos, slots, self.k_cache, self.v_cache)[0]

    def _step(self, tokens: torch.Tensor, pos: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
        """One decode step for ``n`` rows; returns the greedy next tokens (on the device)."""
        if not self.use_cuda_graphs:
            return self.model(
                tokens[:, None], pos[:, None], slots, self.k_cache, self.v_cache
            ).argmax(-1)
        n = tokens.shape[0]
        if n not in self._graphs:
            self._graphs[n] = self._capture(tokens, pos, slots)
        graph, buf = self._graphs[n]
        buf["tokens"].copy_(tokens)
        buf["pos"].copy_(pos)
        buf["slots"].copy_(slots)
        graph.replay()
        return buf["out"].clone()

    def _capture(self, tokens: torch.Tensor, pos: torch.Tensor, slots: torch.Tensor) -> Any:
        buf = {"tokens": tokens.clone(), "pos": pos.clone(), "slots": slots.clone()}
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm up outside the graph, as capture requires
            self.model(
                buf["tokens"][:, None],
                buf["pos"][:, None],
                buf["slots"],
                self.k_cache,
                self.v_cache,
            )
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            buf["out"] = self.model(
                buf["tokens"][:, None],
                buf["pos"][:, None],
                buf["slots"],
                self.k_cache,
                self.v_cache,
            ).argmax(-1)
        return graph, buf

    @torch.no_grad()
    def decode_window(
        self,
        slots: Sequence[int],
        last_tokens: Sequence[int],
        positions: Sequence[int],
        k: int,
        *,
        remaining: Sequence[int] | None = None,
        stop_token: int | None = None,
    ) -> WindowResult:
        """``k`` greedy decode steps for each row without a host sync inside the window.

        Row ``i`` feeds ``last_tokens[i]`` at ``positions[i]`` first. ``remaining[i]`` is how many
        more tokens the request may produce. When the cache lacks ``k`` positions for a row, ``k`` is
        reduced with a :class:`LookaheadReducedWarning`.
        """
        out = self._launch_window(slots, last_tokens, positions, k)
        return _finish_window(out, remaining, stop_token)

    def _launch_window(
        self, slots: Sequence[int], last_tokens: Sequence[int], positions: Sequence[int], k: int
    ) -> torch.Tensor:
        n = len(slots)
        if not n == len(last_tokens) == len(positions) or n == 0:
            raise ValueError("slots, last_tokens and positions must be non-empty and equally long")
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        room = self.max_len - max(positions)
        if room < 1:
            raise ValueError(f"a row is at position {max(positions)}, past max_len {self.max_len}")
        if room < k:
            warnings.warn(
                f"the KV cache holds {room} more positions, not {k}: look-ahead reduced to {room}",
                LookaheadReducedWarning,
                stacklevel=3,
            )
            k = room
        dev = self.device
        tok = torch.tensor(list(last_tokens), device=dev)
        pos = torch.tensor(list(positions), device=dev)
        slot_t = torch.tensor(list(slots), device=dev)
        out = torch.empty(n, k, dtype=torch.long, device=dev)
        for j in range(k):  # each step's token feeds the next on the device: no host round trip
            tok = self._step(tok, pos, slot_t)
            out[:, j] = tok
            pos = pos + 1
        return out

    @torch.no_grad()
    def spatial_step(
        self,
        window: dict[str, Any],
        prefill: dict[str, Any],
        partition: Any | None = None,
    ) -> tuple[WindowResult, torch.Tensor]:
        """A decode window (``decode_window`` kwargs) and a prefill chunk (``prefill`` kwargs) on
        the two streams of ``partition`` (a :class:`~duetserve.partition.Partition`): the decode
        window is launched first, then the prefill, and only then does the host wait on either.
        Without a partition they run one after the other on the current stream."""
        if partition is None:
            return self.decode_window(**window), self.prefill(**prefill)
        stop = {key: window.pop(key) for key in ("remaining", "stop_token") if key in window}
        with torch.cuda.stream(partition.decode_stream):
            out = self._launch_window(**window)
        with torch.cuda.stream(partition.prefill_stream):
            logits = self.prefill(**prefill)
        partition.decode_stream.synchronize()
        partition.prefill_stream.synchronize()
        return _finish_window(out, stop.get("remaining"), stop.get("stop_token")), logits


def _finish_window(
    out: torch.Tensor, remaining: Sequence[int] | None, stop_token: int | None
) -> WindowResult:
    """The deferred stop checks: after the window, count each row's useful tokens."""
    host = out.cpu()  # the window's only sync
    n, k = host.shape
    rem = list(remaining) if remaining is not None else [k] * n
    useful = []
    for i in range(n):
        u = min(k, rem[i])
        if stop_token is not None:
            hits = (host[i, :u] == stop_token).nonzero()
            if hits.numel():
                u = int(hits[0, 0]) + 1
        useful.append(u)
    return WindowResult(host, useful, n * k - sum(useful), k)
