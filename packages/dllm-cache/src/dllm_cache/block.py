"""One bidirectional transformer block, in full and with dLLM-Cache's partial recomputation.

Pure functions of a block's parts (:class:`BlockParts`, handed over by an adapter), its input
hidden states ``h`` (B×T×d), the rotary tables and a key padding mask. The cached path reads and
writes a :class:`LayerCache`; K is kept after the rotary embedding (a token never changes position,
and the rotation leaves the cosine between two copies of the same row unchanged).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from dllm_cache.config import DLLMCacheConfig
from dllm_cache.flops import BlockDims, RowCounts
from shared_core.kernels import cosine_topk, gather_rows, scatter_rows


@dataclasses.dataclass(frozen=True)
class BlockParts:
    """The submodules of one block that dLLM-Cache calls separately.

    ``mlp`` maps the *normalised* FFN input to the FFN-branch output; ``qk_norm`` is unused by
    LLaDA-8B, Llama and Dream and not supported.
    """

    attn_norm: Callable[[Tensor], Tensor]
    q_proj: Callable[[Tensor], Tensor]
    k_proj: Callable[[Tensor], Tensor]
    v_proj: Callable[[Tensor], Tensor]
    o_proj: Callable[[Tensor], Tensor]
    ff_norm: Callable[[Tensor], Tensor]
    mlp: Callable[[Tensor], Tensor]
    dims: BlockDims


@dataclasses.dataclass
class LayerCache:
    """Cached features of one layer over the whole sequence (rows ``[0, P)`` prompt, rest response).

    ``k``/``v``: key/value projections (``k`` after RoPE); ``a``: attention-branch output after
    the output projection; ``f``: FFN-branch output. ``selected``: the response rows (0-based
    within the response) recomputed on the last adaptive update, ``None`` before one.
    """

    k: Tensor
    v: Tensor
    a: Tensor
    f: Tensor
    selected: Tensor | None = None


def rotate_half(x: Tensor) -> Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor, head_dim: int) -> Tensor:
    """Rotary embedding of ``x`` (B×n×(heads·head_dim)) with ``cos``/``sin`` of shape (1|B)×n×head_dim.

    Computed in float32 and cast back, as LLaDA does (``rope_full_precision``).
    """
    B, n, width = x.shape
    xh = x.view(B, n, width // head_dim, head_dim).float()
    c, s = cos.unsqueeze(2).float(), sin.unsqueeze(2).float()
    return ((xh * c) + (rotate_half(xh) * s)).to(x.dtype).view(B, n, width)


def attend(q: Tensor, k: Tensor, v: Tensor, key_mask: Tensor | None, dims: BlockDims) -> Tensor:
    """Bidirectional attention of query rows ``q`` (B×n×H·hd) over all keys ``k``/``v`` (B×T×Hkv·hd).

    ``key_mask`` (B×T bool, ``True`` = attend) drops padding keys; ``None`` attends everywhere.
    """
    B, n, _ = q.shape
    T, hd = k.shape[1], dims.head_dim
    qh = q.view(B, n, dims.n_heads, hd).transpose(1, 2)
    kh = k.view(B, T, dims.n_kv_heads, hd).transpose(1, 2)
    vh = v.view(B, T, dims.n_kv_heads, hd).transpose(1, 2)
    if dims.n_kv_heads != dims.n_heads:
        groups = dims.n_heads // dims.n_kv_heads
        kh, vh = kh.repeat_interleave(groups, dim=1), vh.repeat_interleave(groups, dim=1)
    mask = None if key_mask is None else key_mask[:, None, None, :]
    out = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask)
    return out.transpose(1, 2).reshape(B, n, dims.n_heads * hd)


def full_block(
    parts: BlockParts, h: Tensor, cos: Tensor, sin: Tensor, key_mask: Tensor | None
) -> tuple[Tensor, LayerCache]:
    """The block's ordinary forward; returns the output and every feature dLLM-Cache stores."""
    hd = parts.dims.head_dim
    x = parts.attn_norm(h)
    q = apply_rope(parts.q_proj(x), cos, sin, hd)
    k = apply_rope(parts.k_proj(x), cos, sin, hd)
    v = parts.v_proj(x)
    a = parts.o_proj(attend(q, k, v, key_mask, parts.dims))
    h1 = h + a
    f = parts.mlp(parts.ff_norm(h1))
    return h1 + f, LayerCache(k=k, v=v, a=a, f=f)


def select_rows(
    new: Tensor,
    cached: Tensor,
    k: int,
    selection: str = "value",
    generator: torch.Generator | None = None,
) -> Tensor:
    """Indices (B×k) of the ``k`` rows whose feature moved most: argmin-k of ``cos(new, cached)``.

    The cosine is taken over the whole feature row in float32 (bf16 inputs included); ties go
    to ``torch.topk``'s order. ``selection="random"`` draws ``k`` distinct rows uniformly instead.
    """
    if selection == "random":
        B, n = new.shape[:2]
        device = generator.device if generator is not None else new.device
        noise = torch.rand(B, n, generator=generator, device=device).to(new.device)
        return noise.argsort(dim=-1)[:, :k]
    return cosine_topk(new, cached, k, largest=False).indices


def _cat(parts: list[Tensor]) -> Tensor:
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)


def cached_block(
    parts: BlockParts,
    h: Tensor,
    cos: Tensor,
    sin: Tensor,
    key_mask: Tensor | None,
    cache: LayerCache | None,
    prompt_length: int,
    refresh_prompt: bool,
    refresh_response: bool,
    config: DLLMCacheConfig,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, LayerCache, RowCounts]:
    """One block under dLLM-Cache (spec §2.2): output, updated cache and the rows recomputed.

    Case A (refresh both) is :func:`full_block`. Otherwise the prompt rows ``[0, P)`` and/or the
    response rows are recomputed, and between response refreshes the ``floor(R ρ)`` response
    rows whose probe feature (V by default) has the lowest cosine with its cached copy; every
    other row adds its cached attention/FFN output to the *current* residual stream.
    """
    T = h.shape[1]
    P, R = prompt_length, T - prompt_length
    if cache is None or (refresh_prompt and refresh_response):
        out, fresh = full_block(parts, h, cos, sin, key_mask)
        return out, fresh, RowCounts(T, T, T, T, T)

    hd = parts.dims.head_dim
    K, V, A, Fc = cache.k, cache.v, cache.a, cache.f
    counts = RowCounts()
    queries: list[Tensor] = []  # recomputed query rows, prompt first then response subset
    if refresh_prompt:
        xp = parts.attn_norm(h[:, :P])
        queries.append(apply_rope(parts.q_proj(xp), cos[:, :P], sin[:, :P], hd))
        K = torch.cat([apply_rope(parts.k_proj(xp), cos[:, :P], sin[:, :P], hd), K[:, P:]], 1)
        V = torch.cat([parts.v_proj(xp), V[:, P:]], 1)
        counts += RowCounts(P, P, P, P)

    # Response rows: all of them (case B), an adaptive subset I (C/D with ρ > 0) or none.
    index: Tensor | None = None  # (B, n) response rows that get a fresh query and FFN row
    attn_rows_done = False
    if refresh_response:
        xr = parts.attn_norm(h[:, P:])
        queries.append(apply_rope(parts.q_proj(xr), cos[:, P:], sin[:, P:], hd))
        K = torch.cat([K[:, :P], apply_rope(parts.k_proj(xr), cos[:, P:], sin[:, P:], hd)], 1)
        V = torch.cat([V[:, :P], parts.v_proj(xr)], 1)
        index = torch.arange(R, device=h.device).expand(h.shape[0], R)
        counts += RowCounts(R, R, R, R)
    elif config.adaptive:
        n_sel = config.tokens_per_update(R)
        xr = parts.attn_norm(h[:, P:])
        cos_r = cos[:, P:].expand(h.shape[0], -1, -1)
        sin_r = sin[:, P:].expand(h.shape[0], -1, -1)
        if config.selection in ("value", "random"):
            v_new = parts.v_proj(xr)
            index = select_rows(v_new, V[:, P:], n_sel, config.selection, generator)
            xs = gather_rows(xr, index)
            pos_c, pos_s = gather_rows(cos_r, index), gather_rows(sin_r, index)
            k_sel = apply_rope(parts.k_proj(xs), pos_c, pos_s, hd)
            queries.append(apply_rope(parts.q_proj(xs), pos_c, pos_s, hd))
            K = torch.cat([K[:, :P], scatter_rows(K[:, P:], index, k_sel)], 1)
            V = torch.cat([V[:, :P], v_new], 1)  # computed for every row anyway: all refreshed
            counts += RowCounts(q=n_sel, k=n_sel, v=R, attn=n_sel)
        elif config.selection == "key":
            k_new = apply_rope(parts.k_proj(xr), cos_r, sin_r, hd)
            index = select_rows(k_new, K[:, P:], n_sel)
            xs = gather_rows(xr, index)
            pos_c, pos_s = gather_rows(cos_r, index), gather_rows(sin_r, index)
            queries.append(apply_rope(parts.q_proj(xs), pos_c, pos_s, hd))
            K = torch.cat([K[:, :P], k_new], 1)
            V = torch.cat([V[:, :P], scatter_rows(V[:, P:], index, parts.v_proj(xs))], 1)
            counts += RowCounts(q=n_sel, k=R, v=n_sel, attn=n_sel)
        else:  # attn_out: the probe is the attention output itself, so only the FFN is saved
            q_all = apply_rope(parts.q_proj(xr), cos_r, sin_r, hd)
            K = torch.cat([K[:, :P], apply_rope(parts.k_proj(xr), cos_r, sin_r, hd)], 1)
            V = torch.cat([V[:, :P], parts.v_proj(xr)], 1)
            a_new = parts.o_proj(attend(q_all, K, V, key_mask, parts.dims))
            index = select_rows(a_new, A[:, P:], n_sel)
            A = torch.cat([A[:, :P], a_new], 1)
            attn_rows_done = True
            counts += RowCounts(q=R, k=R, v=R, attn=R)

    if queries:
        a_rows = parts.o_proj(attend(_cat(queries), K, V, key_mask, parts.dims))
        n_p = P if refresh_prompt else 0
        a_prompt = a_rows[:, :n_p] if refresh_prompt else A[:, :P]
        a_resp = A[:, P:]
        if index is not None and not attn_rows_done:
            a_resp = (
                a_rows[:, n_p:]
                if refresh_response
                else scatter_rows(a_resp, index, a_rows[:, n_p:])
            )
        A = torch.cat([a_prompt, a_resp], 1)
    h1 = h + A

    ffn_in: list[Tensor] = []
    if refresh_prompt:
        ffn_in.append(h1[:, :P])
    if index is not None:
        ffn_in.append(h1[:, P:] if refresh_response else gather_rows(h1[:, P:], index))
    if ffn_in:
        f_rows = parts.mlp(parts.ff_norm(_cat(ffn_in)))
        n_p = P if refresh_prompt else 0
        f_prompt = f_rows[:, :n_p] if refresh_prompt else Fc[:, :P]
        f_resp = Fc[:, P:]
        if index is not None:
            f_resp = (
                f_rows[:, n_p:]
                if refresh_response
                else scatter_rows(f_resp, index, f_rows[:, n_p:])
            )
        Fc = torch.cat([f_prompt, f_resp], 1)
        counts += RowCounts(ffn=sum(x.shape[1] for x in ffn_in))
    selected = None if refresh_response or index is None else index
    return h1 + Fc, LayerCache(k=K, v=V, a=A, f=Fc, selected=selected), counts
