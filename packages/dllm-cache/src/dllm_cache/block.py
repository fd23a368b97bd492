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


@dataclasses.dataclass(frozen=True)
class RowTables:
    """What every cached layer of one generation shares, computed once (not once per layer).

    ``cos``/``sin``: rotary tables as (1|B)×T×1×head_dim float32, ``sin`` with the sign of
    :func:`rotate_half` folded in (its first half negated), so the rotation is
    ``x·cos + roll(x, head_dim/2)·sin``: three element-wise ops instead of a chunk, a negation
    and a concatenation, with the same bits (a negation is exact). ``response``: the response
    rows' ``[cos | sin]``, (1|B)×R×2·head_dim, gathered in one ``index_select`` for the rows an
    adaptive update picks. ``full_offsets``/``response_offsets`` (B×1): ``b·T + P`` and ``b·R``,
    which turn a B×k row index into flat rows of the B×T and B×R buffers with one addition.
    """

    cos: Tensor
    sin: Tensor
    response: Tensor
    full_offsets: Tensor
    response_offsets: Tensor

    def full_rows(self, index: Tensor) -> Tensor:
        """Flat rows of response positions ``index`` (B×k) in a B×T×w buffer (see :func:`flat_rows`)."""
        return (index + self.full_offsets).reshape(-1)

    def response_rows(self, index: Tensor) -> Tensor:
        """Flat rows of response positions ``index`` (B×k) in a B×R×w buffer."""
        return (index + self.response_offsets).reshape(-1)

    def at(self, index: Tensor, local: Tensor) -> tuple[Tensor, Tensor]:
        """``(cos, sin)`` of the response positions ``index`` (B×k), each B×k×1×head_dim."""
        table = self.response
        width = table.shape[-1]
        if table.shape[0] == 1:  # one table for the batch: no expand
            rows = table[0].index_select(0, index.reshape(-1))
        else:
            rows = table.reshape(-1, width).index_select(0, local)
        rows = rows.view(*index.shape, 1, width)
        return rows[..., : width // 2], rows[..., width // 2 :]


def row_tables(cos: Tensor, sin: Tensor, batch: int, prompt_length: int) -> RowTables:
    """:class:`RowTables` from rotary tables ``cos``/``sin`` of shape (1|B)×T×head_dim."""
    cos, sin = cos.float(), sin.float()
    half = cos.shape[-1] // 2
    signed = torch.cat([-sin[..., :half], sin[..., half:]], dim=-1)
    T, P = cos.shape[1], prompt_length
    b = torch.arange(batch, device=cos.device).unsqueeze(1)
    return RowTables(
        cos=cos.unsqueeze(2), sin=signed.unsqueeze(2),
        response=torch.cat([cos[:, P:], signed[:, P:]], dim=-1).contiguous(),
        full_offsets=b * T + P, response_offsets=b * (T - P),
    )  # fmt: skip


def _check_tables(tables: RowTables, batch: int, seq_len: int, prompt_length: int) -> None:
    """Tables built for another batch or prompt length would index the wrong rows silently."""
    got = (tables.response_offsets.shape[0], tables.cos.shape[1], tables.response.shape[1])
    want = (batch, seq_len, seq_len - prompt_length)
    if got != want:
        raise ValueError(
            f"tables (batch, sequence length, response length) = {got}, but the input needs {want} "
            f"(h of batch {batch} and length {seq_len}, prompt_length {prompt_length}); "
            "build them with row_tables(cos, sin, batch, prompt_length)"
        )


def rope_folded(x: Tensor, cos: Tensor, sin: Tensor, head_dim: int) -> Tensor:
    """:func:`apply_rope` with :class:`RowTables`' tables ((1|B)×n×1×head_dim, sign-folded ``sin``).

    Bit for bit the same result: ``rotate_half(x)·sin == roll(x, head_dim/2)·folded_sin``.
    """
    B, n, width = x.shape
    xh = x.view(B, n, width // head_dim, head_dim)
    if xh.dtype != torch.float32:
        xh = xh.float()
    out = xh * cos
    out += xh.roll(head_dim // 2, -1) * sin
    if out.dtype != x.dtype:
        out = out.to(x.dtype)
    return out.view(B, n, width)


RopeFn = Callable[[Tensor, Tensor, Tensor, int], Tensor]


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
    q, k = _rope_qk(parts, x, cos, sin, apply_rope)
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
    """Row numbers of ``(b, start + index[b, j])`` in a contiguous B×``seq_len``×w buffer viewed as (B·seq_len)×w."""
    offsets = torch.arange(index.shape[0], device=index.device).unsqueeze(1) * seq_len + start
    return (index + offsets).reshape(-1)


def _take(x: Tensor, flat: Tensor) -> Tensor:
    """Rows ``flat`` (from :func:`flat_rows`) of the contiguous B×n×w tensor ``x``, as B×k×w."""
    B, _, width = x.shape
    return x.reshape(-1, width).index_select(0, flat).view(B, -1, width)


def _put(buf: Tensor, flat: Tensor, rows: Tensor) -> None:
    width = buf.shape[-1]
    if rows.dtype != buf.dtype:
        rows = rows.to(buf.dtype)
    buf.view(-1, width).index_copy_(0, flat, rows.reshape(-1, width))


def write_rows(buf: Tensor, start: int, index: Tensor | None, rows: Tensor) -> None:
    """In place: ``buf[b, start + index[b, j]] = rows[b, j]``, or ``buf[:, start:start + n] = rows``.

    One ``index_copy_`` into the flattened (contiguous) buffer, so a cached step copies only the
    rows it recomputed instead of concatenating full-sequence tensors.
    """
    if index is None:
        buf[:, start : start + rows.shape[1]].copy_(rows)
        return
    _put(buf, flat_rows(index, buf.shape[1], start), rows)


def _rope_qk(
    parts: BlockParts, x: Tensor, cos: Tensor, sin: Tensor, rope: RopeFn = rope_folded
) -> tuple[Tensor, Tensor]:
    """Rotated queries and keys of rows ``x``: one rotary pass over ``[q | k]`` (same positions).

    ``rope``: :func:`rope_folded` with :class:`RowTables`' tables, or :func:`apply_rope` with
    the model's own.
    """
    q, k = parts.q_proj(x), parts.k_proj(x)
    qk = rope(torch.cat([q, k], dim=-1), cos, sin, parts.dims.head_dim)
    return qk.split([q.shape[-1], k.shape[-1]], dim=-1)


@dataclasses.dataclass
class _Rows:
    """The rows one cached layer call recomputes, in order: prompt rows first, then response rows.

    ``h``/``a``: their block inputs and fresh attention outputs, piece by piece (concatenated
    once for the FFN); ``flat``: the adaptive update's rows in the B×T buffers, ``None`` when
    every response row (or none) is recomputed.
    """

    queries: list[Tensor] = dataclasses.field(default_factory=list)
    h: list[Tensor] = dataclasses.field(default_factory=list)
    a: list[Tensor] = dataclasses.field(default_factory=list)
    index: Tensor | None = None
    flat: Tensor | None = None


def _select_response(
    parts: BlockParts,
    h: Tensor,
    tables: RowTables,
    cache: LayerCache,
    P: int,
    key_mask: Tensor | None,
    config: DLLMCacheConfig,
    generator: torch.Generator | None,
    rows: _Rows,
) -> None:
    """The adaptive update's probe (spec §2.2 C/D): picks the response rows ``I`` and records
    them, their block inputs and queries in ``rows`` (for the attention-output probe, the
    attention output itself is recorded instead of queries: it is already computed).

    Writes the probe feature of every response row and the other features of the rows in ``I``
    into ``cache`` in place.
    """
    hd = parts.dims.head_dim
    xr = parts.attn_norm(h[:, P:])
    n_sel = config.tokens_per_update(xr.shape[1])
    cos_r, sin_r = tables.cos[:, P:], tables.sin[:, P:]
    if config.selection == "attn_out":  # the probe is the attention output: only the FFN is saved
        q_all, k_all = _rope_qk(parts, xr, cos_r, sin_r)
        write_rows(cache.k, P, None, k_all)
        write_rows(cache.v, P, None, parts.v_proj(xr))
        a_new = parts.o_proj(attend(q_all, cache.k, cache.v, key_mask, parts.dims))
        index = select_rows(a_new, cache.a[:, P:], n_sel)
        write_rows(cache.a, P, None, a_new)
        flat = tables.full_rows(index)
        rows.a.append(_take(cache.a, flat))
    elif config.selection == "key":
        k_new = rope_folded(parts.k_proj(xr), cos_r, sin_r, hd)
        index = select_rows(k_new, cache.k[:, P:], n_sel)
        local, flat = tables.response_rows(index), tables.full_rows(index)
        xs = _take(xr, local)
        write_rows(cache.k, P, None, k_new)
        _put(cache.v, flat, parts.v_proj(xs))
        rows.queries.append(rope_folded(parts.q_proj(xs), *tables.at(index, local), hd))
    else:  # value or random: V is computed for every row anyway, so all of it is refreshed
        v_new = parts.v_proj(xr)
        index = select_rows(v_new, cache.v[:, P:], n_sel, config.selection, generator)
        local, flat = tables.response_rows(index), tables.full_rows(index)
        q_sel, k_sel = _rope_qk(parts, _take(xr, local), *tables.at(index, local))
        _put(cache.k, flat, k_sel)
        write_rows(cache.v, P, None, v_new)
        rows.queries.append(q_sel)
    rows.index, rows.flat = index, flat
    rows.h.append(_take(h, flat))


def _refresh(
    parts: BlockParts, h: Tensor, tables: RowTables, cache: LayerCache, lo: int, hi: int,
    rows: _Rows,
) -> None:  # fmt: skip
    """Every row in ``[lo, hi)`` (the prompt or the response): fresh K/V written, queries kept."""
    x = parts.attn_norm(h[:, lo:hi])
    q, k = _rope_qk(parts, x, tables.cos[:, lo:hi], tables.sin[:, lo:hi])
    write_rows(cache.k, lo, None, k)
    write_rows(cache.v, lo, None, parts.v_proj(x))
    rows.queries.append(q)
    rows.h.append(h[:, lo:hi])


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
    tables: RowTables | None = None,
) -> tuple[Tensor, LayerCache, RowCounts]:
    """One block under dLLM-Cache (spec §2.2): output, updated cache and the rows recomputed.

    Case A (refresh both) is :func:`full_block`. Otherwise the prompt rows ``[0, P)`` and/or the
    response rows are recomputed, and between response refreshes the ``floor(R ρ)`` response
    rows whose probe feature (V by default) has the lowest cosine with its cached copy; every
    other row adds its cached attention/FFN output to the *current* residual stream. The cache's
    full-sequence buffers are updated in place, row by row. The rows recomputed are
    :func:`~dllm_cache.flops.case_rows` of the case, the one count the FLOPs model also uses.
    ``tables``: :func:`row_tables` of ``cos``/``sin``, which a generation computes once for
    all its layers (built here when left out).
    """
    T = h.shape[1]
    P, R = prompt_length, T - prompt_length
    case = case_of(refresh_prompt, refresh_response)
    if cache is None or case == "A":
        out, fresh = full_block(parts, h, cos, sin, key_mask)
        return out, fresh, case_rows("A", P, R, config)
    if tables is None:
        tables = row_tables(cos, sin, h.shape[0], P)
    else:
        _check_tables(tables, h.shape[0], T, P)

    rows = _Rows()
    if refresh_prompt:
        _refresh(parts, h, tables, cache, 0, P, rows)
    # Response rows: all of them (case B), an adaptive subset I (C/D with ρ > 0) or none.
    if refresh_response:
        _refresh(parts, h, tables, cache, P, T, rows)
    elif config.adaptive:
        _select_response(parts, h, tables, cache, P, key_mask, config, generator, rows)
    cache.selected = rows.index
    if rows.h:
        _recompute(parts, cache, rows, key_mask, P if refresh_prompt else 0, P)
    out = h + cache.a  # one full-sequence tensor per layer, the sum finished in place
    out += cache.f
    return out, cache, case_rows(case, P, R, config)


def _recompute(
    parts: BlockParts, cache: LayerCache, rows: _Rows, key_mask: Tensor | None, n_p: int, P: int
) -> None:
    """Attention of the fresh queries and the FFN of every recomputed row, written in place.

    ``n_p``: how many of the rows are prompt rows (``P`` or 0). The FFN's input is each row's
    ``h + a`` with its fresh attention output, so no full-sequence residual is formed.
    """
    if rows.queries:
        a_rows = parts.o_proj(attend(_cat(rows.queries), cache.k, cache.v, key_mask, parts.dims))
        if n_p:
            write_rows(cache.a, 0, None, a_rows[:, :n_p])
        if a_rows.shape[1] > n_p:
            if rows.flat is None:
                write_rows(cache.a, P, None, a_rows[:, n_p:])
            else:
                _put(cache.a, rows.flat, a_rows[:, n_p:])
        rows.a.insert(0, a_rows)
    f_rows = parts.mlp(parts.ff_norm(_cat(rows.h) + _cat(rows.a)))
    if n_p:
        write_rows(cache.f, 0, None, f_rows[:, :n_p])
    if f_rows.shape[1] > n_p:
        if rows.flat is None:
            write_rows(cache.f, P, None, f_rows[:, n_p:])
        else:
            _put(cache.f, rows.flat, f_rows[:, n_p:])
