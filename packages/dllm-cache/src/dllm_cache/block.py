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

from dllm_cache.config import SELECTIONS, DLLMCacheConfig
from dllm_cache.flops import BlockDims, RowCounts, case_of, case_rows
from shared_core.kernels import cosine_topk


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
    x = parts.attn_norm(h)
    q, k = _rope_qk(parts, x, cos, sin)
    v = parts.v_proj(x)
    a = parts.o_proj(attend(q, k, v, key_mask, parts.dims))
    h1 = h + a
    f = parts.mlp(parts.ff_norm(h1))
    return h1 + f, LayerCache(k=k.contiguous(), v=v.contiguous(), a=a, f=f)


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
    if selection not in SELECTIONS:
        raise ValueError(f"selection must be one of {SELECTIONS}, got {selection!r}")
    if selection == "random":
        B, n = new.shape[:2]
        device = generator.device if generator is not None else new.device
        noise = torch.rand(B, n, generator=generator, device=device).to(new.device)
        return noise.argsort(dim=-1)[:, :k]
    return cosine_topk(new, cached, k, largest=False).indices


def _cat(parts: list[Tensor]) -> Tensor:
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)


def flat_rows(index: Tensor, seq_len: int, start: int = 0) -> Tensor:
    """Row numbers of ``(b, start + index[b, j])`` in a contiguous B×``seq_len``×w buffer viewed as (B·seq_len)×w.

    Computed once per layer call and shared by every write and gather of the same rows.
    """
    offsets = torch.arange(index.shape[0], device=index.device).unsqueeze(1) * seq_len + start
    return (index + offsets).reshape(-1)


def _take(x: Tensor, flat: Tensor) -> Tensor:
    """Rows ``flat`` (from :func:`flat_rows`) of the contiguous B×n×w tensor ``x``, as B×k×w."""
    B, _, width = x.shape
    return x.reshape(-1, width).index_select(0, flat).view(B, -1, width)


def _put(buf: Tensor, flat: Tensor, rows: Tensor) -> None:
    width = buf.shape[-1]
    buf.view(-1, width).index_copy_(0, flat, rows.reshape(-1, width).to(buf.dtype))


def write_rows(buf: Tensor, start: int, index: Tensor | None, rows: Tensor) -> None:
    """In place: ``buf[b, start + index[b, j]] = rows[b, j]``, or ``buf[:, start:start + n] = rows``.

    One ``index_copy_`` into the flattened (contiguous) buffer, so a cached step copies only the
    rows it recomputed instead of concatenating full-sequence tensors.
    """
    if index is None:
        buf[:, start : start + rows.shape[1]].copy_(rows)
        return
    _put(buf, flat_rows(index, buf.shape[1], start), rows)


def _table_rows(table: Tensor, index: Tensor, rows: Tensor) -> Tensor:
    """Rotary table rows (B×k×head_dim) of the response positions ``index`` (B×k).

    ``table`` is the response part, (1|B)×R×head_dim; ``rows`` is ``flat_rows(index, R)``.
    """
    if table.shape[0] == 1:  # one table for the batch: no expand, one index_select
        return table[0].index_select(0, index.reshape(-1)).view(*index.shape, table.shape[-1])
    return _take(table, rows)


def _rope_qk(parts: BlockParts, x: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
    """Rotated queries and keys of rows ``x``: one rotary pass over ``[q | k]`` (same positions)."""
    q, k = parts.q_proj(x), parts.k_proj(x)
    qk = apply_rope(torch.cat([q, k], dim=-1), cos, sin, parts.dims.head_dim)
    return qk.split([q.shape[-1], k.shape[-1]], dim=-1)


def _select_response(
    parts: BlockParts,
    xr: Tensor,
    tables: tuple[Tensor, Tensor],
    cache: LayerCache,
    P: int,
    key_mask: Tensor | None,
    config: DLLMCacheConfig,
    generator: torch.Generator | None,
) -> tuple[Tensor, Tensor, Tensor | None]:
    """The adaptive update's probe (spec §2.2 C/D): rows ``I`` (B×k), their :func:`flat_rows` in
    the full-sequence buffers, and their queries (or ``None`` when the attention output was the
    probe and is already written). ``tables``: the response rows' ``(cos, sin)``,
    (1|B)×R×head_dim.

    Writes the probe feature of every response row and the other features of the rows in ``I``
    into ``cache`` in place.
    """
    hd, R = parts.dims.head_dim, xr.shape[1]
    T = cache.k.shape[1]
    n_sel = config.tokens_per_update(R)
    cos_r, sin_r = tables
    if config.selection in ("value", "random"):
        v_new = parts.v_proj(xr)
        index = select_rows(v_new, cache.v[:, P:], n_sel, config.selection, generator)
        local, flat = flat_rows(index, R), flat_rows(index, T, P)
        pos = (_table_rows(cos_r, index, local), _table_rows(sin_r, index, local))
        q_sel, k_sel = _rope_qk(parts, _take(xr, local), *pos)
        _put(cache.k, flat, k_sel)
        write_rows(cache.v, P, None, v_new)  # computed for every row anyway: all refreshed
        return index, flat, q_sel
    if config.selection == "key":
        k_new = apply_rope(parts.k_proj(xr), cos_r, sin_r, hd)
        index = select_rows(k_new, cache.k[:, P:], n_sel)
        local, flat = flat_rows(index, R), flat_rows(index, T, P)
        pos = (_table_rows(cos_r, index, local), _table_rows(sin_r, index, local))
        xs = _take(xr, local)
        write_rows(cache.k, P, None, k_new)
        _put(cache.v, flat, parts.v_proj(xs))
        return index, flat, apply_rope(parts.q_proj(xs), *pos, hd)
    # attn_out: the probe is the attention output itself, so only the FFN is saved
    q_all, k_all = _rope_qk(parts, xr, cos_r, sin_r)
    write_rows(cache.k, P, None, k_all)
    write_rows(cache.v, P, None, parts.v_proj(xr))
    a_new = parts.o_proj(attend(q_all, cache.k, cache.v, key_mask, parts.dims))
    index = select_rows(a_new, cache.a[:, P:], n_sel)
    write_rows(cache.a, P, None, a_new)
    return index, flat_rows(index, T, P), None


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
    other row adds its cached attention/FFN output to the *current* residual stream. The cache's
    full-sequence buffers are updated in place, row by row. The rows recomputed are
    :func:`~dllm_cache.flops.case_rows` of the case, the one count the FLOPs model also uses.
    """
    T = h.shape[1]
    P, R = prompt_length, T - prompt_length
    case = case_of(refresh_prompt, refresh_response)
    if cache is None or case == "A":
        out, fresh = full_block(parts, h, cos, sin, key_mask)
        return out, fresh, case_rows("A", P, R, config)

    queries: list[Tensor] = []  # fresh query rows, prompt first then response
    if refresh_prompt:
        xp = parts.attn_norm(h[:, :P])
        q_p, k_p = _rope_qk(parts, xp, cos[:, :P], sin[:, :P])
        queries.append(q_p)
        write_rows(cache.k, 0, None, k_p)
        write_rows(cache.v, 0, None, parts.v_proj(xp))

    # Response rows: all of them (case B), an adaptive subset I (C/D with ρ > 0) or none.
    index: Tensor | None = None
    flat: Tensor | None = None  # the rows I in the flattened full-sequence buffers
    response = refresh_response or config.adaptive
    if refresh_response:
        xr = parts.attn_norm(h[:, P:])
        q_r, k_r = _rope_qk(parts, xr, cos[:, P:], sin[:, P:])
        queries.append(q_r)
        write_rows(cache.k, P, None, k_r)
        write_rows(cache.v, P, None, parts.v_proj(xr))
    elif config.adaptive:
        index, flat, q_sel = _select_response(
            parts, parts.attn_norm(h[:, P:]), (cos[:, P:], sin[:, P:]), cache, P, key_mask,
            config, generator,
        )  # fmt: skip
        if q_sel is not None:
            queries.append(q_sel)

    n_p = P if refresh_prompt else 0
    if queries:
        a_rows = parts.o_proj(attend(_cat(queries), cache.k, cache.v, key_mask, parts.dims))
        if refresh_prompt:
            write_rows(cache.a, 0, None, a_rows[:, :n_p])
        if a_rows.shape[1] > n_p:
            if flat is None:
                write_rows(cache.a, P, None, a_rows[:, n_p:])
            else:
                _put(cache.a, flat, a_rows[:, n_p:])

    # The FFN's input rows h + a, taken row by row: no full-sequence residual is formed here.
    ffn_in: list[Tensor] = []
    if refresh_prompt:
        ffn_in.append(h[:, :P] + cache.a[:, :P])
    if response:
        if flat is None:
            ffn_in.append(h[:, P:] + cache.a[:, P:])
        else:
            ffn_in.append(_take(h, flat) + _take(cache.a, flat))
    if ffn_in:
        f_rows = parts.mlp(parts.ff_norm(_cat(ffn_in)))
        if refresh_prompt:
            write_rows(cache.f, 0, None, f_rows[:, :n_p])
        if response:
            if flat is None:
                write_rows(cache.f, P, None, f_rows[:, n_p:])
            else:
                _put(cache.f, flat, f_rows[:, n_p:])
    cache.selected = index
    out = h + cache.a  # one full-sequence tensor per layer, the sum finished in place
    out += cache.f
    return out, cache, case_rows(case, P, R, config)
