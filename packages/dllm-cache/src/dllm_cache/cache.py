"""The cache state object, its statistics, and the handle that installs it on a model.

``apply_dllm_cache(model, config)`` patches each block's ``forward``; the patched forward runs the
block unchanged until :meth:`DLLMCache.reset` starts a generation (``generate`` does this), and
from then on follows the refresh schedule of spec §2.2 with an explicit per-stream step counter.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from dllm_cache.adapters import BlockAdapter, resolve_adapter
from dllm_cache.block import BlockParts, LayerCache, RowTables, cached_block, row_tables
from dllm_cache.config import DLLMCacheConfig
from dllm_cache.flops import Case, RowCounts, block_flops, case_of, case_rows, refresh_flags


@dataclasses.dataclass(frozen=True)
class LayerStep:
    """What one layer recomputed on one forward call (rows per sequence; FLOPs for the batch)."""

    generation: int
    stream: str
    step: int
    layer: int
    case: Case
    rows: RowCounts
    batch: int
    seq_len: int
    flops: int
    full_flops: int


@dataclasses.dataclass
class CacheStats:
    """Per layer and step records of a cache, accumulated until :meth:`clear`."""

    records: list[LayerStep] = dataclasses.field(default_factory=list)

    def clear(self) -> None:
        self.records.clear()

    @property
    def flops(self) -> int:
        """Counted FLOPs of the transformer blocks under the cache."""
        return sum(r.flops for r in self.records)

    @property
    def full_flops(self) -> int:
        """FLOPs the same forward calls cost without the cache."""
        return sum(r.full_flops for r in self.records)

    @property
    def flops_ratio(self) -> float:
        """``full_flops / flops`` (above 1: the cache saves)."""
        return self.full_flops / self.flops if self.flops else float("nan")

    def _select(self, generation: int | None, stream: str) -> list[LayerStep]:
        if generation is None and self.records:
            generation = self.records[-1].generation
        return [r for r in self.records if r.generation == generation and r.stream == stream]

    def recomputed_tokens(self, generation: int | None = None, stream: str = "cond") -> np.ndarray:
        """Rows through the FFN per sequence, shape ``(steps, layers)``, of one generation (default: the last)."""
        recs = self._select(generation, stream)
        if not recs:
            return np.zeros((0, 0), dtype=np.int64)
        out = np.zeros((max(r.step for r in recs), max(r.layer for r in recs) + 1), dtype=np.int64)
        for r in recs:
            out[r.step - 1, r.layer] = r.rows.ffn
        return out

    def cases(self, generation: int | None = None, stream: str = "cond") -> list[list[str]]:
        """``cases[t - 1][layer]`` of one generation, comparable with :func:`~dllm_cache.flops.schedule`."""
        recs = self._select(generation, stream)
        steps = max((r.step for r in recs), default=0)
        layers = max((r.layer for r in recs), default=-1) + 1
        out = [[""] * layers for _ in range(steps)]
        for r in recs:
            out[r.step - 1][r.layer] = r.case
        return out


@dataclasses.dataclass
class _Stream:
    step: int = 0
    batch: int | None = None
    seq_len: int | None = None
    prompt_ids: Tensor | None = None
    input_ptr: int | None = None
    rope: tuple[Tensor, Tensor] | None = None
    tables: RowTables | None = None
    layers: dict[int, LayerCache] = dataclasses.field(default_factory=dict)


class DLLMCache:
    """dLLM-Cache state of one model: per-layer prompt/response features and a step counter.

    There is no process-wide singleton: each :func:`apply_dllm_cache` makes its own. A generation
    starts with :meth:`reset` (``generate`` calls it) and ends with :meth:`release`; outside one the
    patched blocks run unchanged. Streams keep separate features and counters for the conditional
    and (CFG) unconditional inputs.
    """

    def __init__(self, config: DLLMCacheConfig | None = None) -> None:
        self.config = config or DLLMCacheConfig()
        self.stats = CacheStats()
        self.prompt_length: int | None = None
        self.generation = 0
        self.cfg_residual: Tensor | None = None
        self._key_mask: Tensor | None = None
        self._streams: dict[str, _Stream] = {}
        self._stream = "cond"
        self._generator = torch.Generator().manual_seed(self.config.seed)
        self._installed_on: nn.Module | None = None
        self._mask_id: int | None = None
        #: whether the cached attention hides padding keys (set by apply_dllm_cache from
        #: ``config.padding`` and the adapter; a bare cache follows ``padding != "ignore"``)
        self.honours_padding = self.config.padding != "ignore"
        #: rows of the sequence end the LM head runs on while a generation is under way, for
        #: models whose forward takes no ``logits_to_keep`` (``generate`` sets it)
        self.head_rows: int | None = None

    @property
    def active(self) -> bool:
        """Whether a generation is under way (between :meth:`reset` and :meth:`release`)."""
        return self.prompt_length is not None

    @property
    def step(self) -> int:
        """Forward calls of the current stream since :meth:`reset` (1-based during a call)."""
        return self._streams[self._stream].step if self._stream in self._streams else 0

    def reset(
        self,
        prompt_length: int,
        attention_mask: Tensor | None = None,
        mask_id: int | None = None,
    ) -> None:
        """Clear every cached feature and start a generation whose prompt has ``prompt_length`` tokens.

        ``attention_mask`` (B×T or B×prompt_length, 1 = token, 0 = padding) hides padding keys in
        the cached attention when :attr:`honours_padding` (``config.padding``); without it all
        keys are attended. ``mask_id`` (``generate`` passes it) makes the first forward check that
        the response starts, fully masked, at ``prompt_length``: a wrong prompt length raises
        instead of silently caching prompt rows as response rows. Leave it out to replay a
        partly decoded sequence.
        """
        if (
            isinstance(prompt_length, bool)
            or not isinstance(prompt_length, int)
            or prompt_length < 1
        ):
            raise ValueError(f"prompt_length must be an int >= 1, got {prompt_length!r}")
        self.release()
        self.prompt_length = prompt_length
        self.generation += 1
        if attention_mask is not None:
            if attention_mask.ndim != 2:
                raise ValueError(
                    f"attention_mask must be B×T, got shape {tuple(attention_mask.shape)}"
                )
            if self.honours_padding and not bool(attention_mask.bool().all()):
                self._key_mask = attention_mask.bool()
        self._mask_id = mask_id if isinstance(mask_id, int) else None
        self._generator.manual_seed(self.config.seed)

    def release(self) -> None:
        """End the generation: drop the features (statistics are kept)."""
        self.prompt_length = None
        self.cfg_residual = None
        self.head_rows = None
        self._key_mask = None
        self._streams = {}
        self._stream = "cond"

    @contextlib.contextmanager
    def stream(self, name: str) -> Iterator[None]:
        """Route the forward calls inside the block to stream ``name`` (``"uncond"`` for CFG)."""
        previous, self._stream = self._stream, name
        try:
            yield
        finally:
            self._stream = previous

    # -- called by the patched model -----------------------------------------------------------
    def _check_prompt(self, input_ids: Tensor | None) -> None:
        """Refuse a different prompt than the one the features were cached for.

        The comparison (a host sync) runs only when the input is not the tensor of the previous
        call: ``generate`` writes the response of one tensor in place, so its steps skip it.
        """
        if not self.active or input_ids is None or not isinstance(input_ids, Tensor):
            return
        assert self.prompt_length is not None
        st = self._streams.setdefault(self._stream, _Stream())
        P = self.prompt_length
        prompt = input_ids[:, :P]
        ptr = input_ids.data_ptr()
        if st.prompt_ids is None:
            self._check_prompt_length(input_ids)
            st.prompt_ids, st.input_ptr = prompt.clone(), ptr
            return
        # Same tensor as last call: generate writes only response rows in place, so the tokens
        # are not compared (no host sync per step). An in-place edit of the *prompt* rows of the
        # same tensor is therefore not detected: call reset() after changing a prompt.
        if ptr == st.input_ptr and st.prompt_ids.shape == prompt.shape:
            return
        st.input_ptr = ptr
        if st.prompt_ids.shape != prompt.shape or not torch.equal(st.prompt_ids, prompt):
            raise ValueError(
                "the prompt differs from the one the cache holds features for; call "
                "cache.reset(prompt_length) before a new prompt (generate does this for you)"
            )

    def _check_prompt_length(self, input_ids: Tensor) -> None:
        """On a generation's first call: the token at ``prompt_length`` must be the first mask."""
        P, mask = self.prompt_length, self._mask_id
        if mask is None or self._stream != "cond" or P is None or not 0 < P < input_ids.shape[1]:
            return
        if bool((input_ids[:, P] != mask).any()) or bool((input_ids[:, P - 1] == mask).any()):
            is_mask = (input_ids == mask).long()
            first = [int(row.argmax()) if bool(row.any()) else None for row in is_mask]
            raise ValueError(
                f"cache.reset(prompt_length={P}) does not match the input: on the first call "
                f"the response must start, fully masked (mask_id={mask}), at position {P}, but "
                f"the first mask of each row is at {first}; pass the prompt's length to reset "
                "(generate does this for you)"
            )

    def _layer_forward(
        self,
        layer: int,
        parts: BlockParts,
        h: Tensor,
        rotary: Callable[[], tuple[Tensor, Tensor]],
    ) -> Tensor:
        assert self.prompt_length is not None
        st = self._streams.setdefault(self._stream, _Stream())
        B, T = h.shape[:2]
        if layer == 0:
            st.step += 1
            if st.seq_len is None:
                if not 0 < self.prompt_length < T:
                    raise ValueError(
                        f"prompt_length={self.prompt_length} must be in [1, {T - 1}] for a sequence "
                        f"of {T} tokens (the response needs at least one position)"
                    )
                if self._key_mask is not None and self._key_mask.shape[0] != B:
                    raise ValueError(
                        f"attention_mask has {self._key_mask.shape[0]} rows, the batch {B}"
                    )
                st.batch, st.seq_len = B, T
        if (st.batch, st.seq_len) != (B, T):
            raise ValueError(
                f"the cache holds features of {st.batch} sequences of {st.seq_len} tokens, got {B}×{T}; "
                "call cache.reset(prompt_length) before a new prompt"
            )
        key_mask = self._key_mask
        if key_mask is not None and key_mask.shape[1] != T:
            # A prompt-only mask: the response is never padding.
            pad = key_mask.new_ones(B, T - key_mask.shape[1])
            key_mask = self._key_mask = torch.cat([key_mask, pad], 1)
        if st.rope is None or st.tables is None:
            # positions never change within a generation: one set of tables for all layers
            cos, sin = rotary()
            st.rope = (cos.float(), sin.float())
            st.tables = row_tables(*st.rope, B, self.prompt_length)
        flags = refresh_flags(st.step, layer, self.config)
        out, st.layers[layer], rows = cached_block(
            parts, h, *st.rope, key_mask, st.layers.get(layer), self.prompt_length,
            *flags, self.config, self._generator, st.tables,
        )  # fmt: skip
        self.stats.records.append(
            LayerStep(
                self.generation,
                self._stream,
                st.step,
                layer,
                case_of(*flags),
                rows,
                B,
                T,
                B * block_flops(parts.dims, rows, T),
                B
                * block_flops(
                    parts.dims,
                    case_rows("A", self.prompt_length, T - self.prompt_length, self.config),
                    T,
                ),
            )
        )
        return out

    def layer_cache(
        self, layer: int, stream: str = "cond", *, copy: bool = True
    ) -> LayerCache | None:
        """The cached features of ``layer`` (``None`` before its first call).

        By default a snapshot (cloned tensors) that later forward calls leave alone. With
        ``copy=False`` the cache's own buffers: partial refreshes (cases B-D) write rows into them
        in place while a full refresh (case A) replaces them, so a kept reference may or may not
        follow later steps; read it before the next forward call.
        """
        st = self._streams.get(stream)
        live = None if st is None else st.layers.get(layer)
        if live is None or not copy:
            return live
        return dataclasses.replace(
            live,
            k=live.k.clone(),
            v=live.v.clone(),
            a=live.a.clone(),
            f=live.f.clone(),
            selected=None if live.selected is None else live.selected.clone(),
        )


class CacheHandle:
    """Returned by :func:`apply_dllm_cache`: holds the :class:`DLLMCache`; ``remove()`` undoes the patch."""

    def __init__(self, model: nn.Module, cache: DLLMCache, adapter: BlockAdapter) -> None:
        self.model = model
        self.cache = cache
        self.adapter = adapter
        self._restore: list[tuple[nn.Module, Any]] = []
        self._hook: Any = None

    @property
    def removed(self) -> bool:
        return self._hook is None

    def remove(self) -> None:
        """Restore every block's own ``forward``; the cache is released. Idempotent."""
        for block, original in self._restore:
            if original is None:
                block.__dict__.pop("forward", None)
            else:
                block.forward = original
        self._restore.clear()
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        self.cache.release()
        self.cache._installed_on = None

    def __enter__(self) -> CacheHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def apply_dllm_cache(
    model: nn.Module,
    config: DLLMCacheConfig | None = None,
    adapter: str | BlockAdapter = "auto",
) -> CacheHandle:
    """Install dLLM-Cache on ``model`` (in place); returns a handle, also a context manager.

    ``adapter``: ``"llada"``, ``"llama"``, ``"dream"``, a :class:`BlockAdapter`, or ``"auto"``
    (the first registered adapter whose modules the model has).

    >>> handle = apply_dllm_cache(model, DLLMCacheConfig(prompt_interval=100, response_interval=7))
    >>> out = generate(model, ids, cache=handle.cache, mask_id=126336)   # doctest: +SKIP
    >>> handle.remove()
    """
    if config is not None and not isinstance(config, DLLMCacheConfig):
        raise TypeError(f"config must be a DLLMCacheConfig, got {type(config).__name__}")
    chosen = resolve_adapter(model, adapter)
    for block in chosen.blocks(model):
        if "forward" in block.__dict__ and getattr(block.forward, "_dllm_cache", False):
            raise ValueError(
                "dLLM-Cache is already applied to this model; remove() the first handle"
            )
    cache = DLLMCache(config)
    padding = cache.config.padding
    cache.honours_padding = padding == "mask" or (
        padding == "model" and chosen.honours_padding(model)
    )
    handle = CacheHandle(model, cache, chosen)
    for layer, block in enumerate(chosen.blocks(model)):
        parts = chosen.parts(model, block)
        original = block.__dict__.get("forward")
        handle._restore.append((block, original))
        block.forward = _patched_forward(model, block, layer, parts, cache, chosen)
    head_input = chosen.head_input(model)
    if head_input is not None:
        handle._restore.append((head_input, head_input.__dict__.get("forward")))
        head_input.forward = _rows_only_forward(head_input, cache)

    def check_prompt(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        cache._check_prompt(args[0] if args else kwargs.get("input_ids"))

    handle._hook = model.register_forward_pre_hook(check_prompt, with_kwargs=True)
    cache._installed_on = model
    return handle


def _rows_only_forward(module: nn.Module, cache: DLLMCache) -> Any:
    """``module`` (the norm before the LM head) on the last ``cache.head_rows`` rows only."""
    original = module.forward

    def forward(x: Tensor, *args: Any, **kwargs: Any) -> Any:
        if cache.active and cache.head_rows:
            x = x[:, -cache.head_rows :]
        return original(x, *args, **kwargs)

    return forward


def _patched_forward(
    model: nn.Module,
    block: nn.Module,
    layer: int,
    parts: BlockParts,
    cache: DLLMCache,
    adapter: BlockAdapter,
) -> Any:
    original = block.forward

    def forward(*args: Any, **kwargs: Any) -> Any:
        if not cache.active:
            return original(*args, **kwargs)
        h = adapter.hidden_states(args, kwargs)
        return adapter.wrap(
            cache._layer_forward(
                layer, parts, h, lambda: adapter.rotary(model, block, args, kwargs, h)
            )
        )

    forward._dllm_cache = True  # type: ignore[attr-defined]
    return forward
