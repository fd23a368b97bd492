"""Which rows a cached layer recomputes, and what that costs: the closed-form schedule.

Everything here is a pure function of shapes and settings. :class:`RowCounts` says how many
rows (per sequence) went through each projection, the attention and the FFN of one layer on one
forward call; :func:`block_flops` prices them with the usual ``2 · in · out`` per row of a
linear map, ``4 · d_attn · T`` per attention query (``QKᵀ`` and ``AV`` over ``T`` keys) and three
SwiGLU matrices. For a full layer this is ``8Td² + 4T²d + 6T·d·d_ff`` (spec §2.4). Norms,
rotary embeddings, the cosine and top-k are ``O(T d)`` and not counted.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Literal

from dllm_cache.config import DLLMCacheConfig

Case = Literal["A", "B", "C", "D"]
LMHead = Literal["full", "response", "none"]


@dataclasses.dataclass(frozen=True)
class BlockDims:
    """Widths of one transformer block."""

    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ff: int


#: LLaDA-8B (32 layers, d=4096, 32 heads of 128, SwiGLU 12288, vocabulary 126464).
LLADA_8B = BlockDims(d_model=4096, n_heads=32, n_kv_heads=32, head_dim=128, d_ff=12288)
LLADA_8B_LAYERS = 32
LLADA_8B_VOCAB = 126464


@dataclasses.dataclass(frozen=True)
class RowCounts:
    """Rows per sequence through each part of one layer on one call (``attn`` = query rows)."""

    q: int = 0
    k: int = 0
    v: int = 0
    attn: int = 0
    ffn: int = 0

    def __add__(self, other: RowCounts) -> RowCounts:
        return RowCounts(
            self.q + other.q,
            self.k + other.k,
            self.v + other.v,
            self.attn + other.attn,
            self.ffn + other.ffn,
        )


def block_flops(dims: BlockDims, rows: RowCounts, seq_len: int) -> int:
    """FLOPs of one layer for one sequence of ``seq_len`` tokens given the recomputed ``rows``.

    Every attention query attends over all ``seq_len`` keys; the output projection runs on the
    attention rows.
    """
    d, dq, dkv = dims.d_model, dims.n_heads * dims.head_dim, dims.n_kv_heads * dims.head_dim
    return (
        2 * d * dq * rows.q
        + 2 * d * dkv * (rows.k + rows.v)
        + 4 * dq * seq_len * rows.attn
        + 2 * dq * d * rows.attn
        + 6 * d * dims.d_ff * rows.ffn
    )


def refresh_flags(step: int, layer: int, config: DLLMCacheConfig) -> tuple[bool, bool]:
    """``(refresh_prompt, refresh_response)`` for forward call ``step`` (1-based) at ``layer``."""
    if step < 1:
        raise ValueError(f"step is 1-based, got {step}")
    first = layer == 0 and config.refresh_first_layer
    return (
        first or (step - 1) % config.prompt_interval == 0,
        first or (step - 1) % config.response_interval == 0,
    )


def case_of(refresh_prompt: bool, refresh_response: bool) -> Case:
    """The four cases of spec §2.2: A both, B response only, C prompt only, D neither."""
    if refresh_prompt:
        return "A" if refresh_response else "C"
    return "B" if refresh_response else "D"


def case_rows(
    case: Case, prompt_length: int, response_length: int, config: DLLMCacheConfig
) -> RowCounts:
    """Closed-form :class:`RowCounts` of one layer in ``case``."""
    P, R = prompt_length, response_length
    if case == "A":
        return RowCounts(P + R, P + R, P + R, P + R, P + R)
    if case == "B":
        return RowCounts(R, R, R, R, R)
    prompt = RowCounts(P, P, P, P, P) if case == "C" else RowCounts()
    if not config.adaptive:
        return prompt
    k = config.tokens_per_update(R)
    probe = {
        # The probe feature is computed for all R response rows; the rest only for the k chosen.
        "value": RowCounts(q=k, k=k, v=R, attn=k, ffn=k),
        "random": RowCounts(q=k, k=k, v=R, attn=k, ffn=k),
        "key": RowCounts(q=k, k=R, v=k, attn=k, ffn=k),
        "attn_out": RowCounts(q=R, k=R, v=R, attn=R, ffn=k),
    }[config.selection]
    return prompt + probe


def _check_counts(**counts: int) -> None:
    for name, value in counts.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")


def schedule(steps: int, n_layers: int, config: DLLMCacheConfig) -> list[list[Case]]:
    """``schedule[t - 1][layer]``: the case of every layer on forward calls ``t = 1..steps``."""
    _check_counts(steps=steps, n_layers=n_layers)
    return [
        [case_of(*refresh_flags(t, layer, config)) for layer in range(n_layers)]
        for t in range(1, steps + 1)
    ]


def generation_flops(
    dims: BlockDims,
    n_layers: int,
    prompt_length: int,
    response_length: int,
    steps: int,
    config: DLLMCacheConfig | None,
    *,
    vocab_size: int = 0,
    lm_head: LMHead = "none",
) -> int:
    """FLOPs of one sequence's generation: ``steps`` forward calls, cached or not (``None``).

    ``lm_head`` adds the output projection over the full sequence (``"full"``, what a FLOPs
    profiler counts for the official code), over the response only, or not at all.
    """
    _check_counts(
        n_layers=n_layers, prompt_length=prompt_length, response_length=response_length,
        steps=steps,
    )  # fmt: skip
    if lm_head not in ("full", "response", "none"):
        raise ValueError(f"lm_head must be 'full', 'response' or 'none', got {lm_head!r}")
    T = prompt_length + response_length
    if config is None:
        calls: Counter[Case] = Counter({"A": steps * n_layers})
    else:
        calls = Counter(case for cases in schedule(steps, n_layers, config) for case in cases)
    config = config or DLLMCacheConfig()
    total = sum(
        n * block_flops(dims, case_rows(case, prompt_length, response_length, config), T)
        for case, n in calls.items()
    )
    head_rows = {"full": T, "response": response_length, "none": 0}[lm_head]
    return total + steps * 2 * dims.d_model * vocab_size * head_rows
