"""dllm-cache: adaptive feature caching for masked-diffusion language models (dLLM-Cache).

Long prompts barely change between denoising steps and most response tokens change slowly: cache
each layer's attention and FFN outputs, refresh the prompt every ``Kp`` steps, the response every
``Kr`` steps, and in between recompute only the ``ρ`` fraction of response tokens whose value
vectors moved most.

>>> handle = apply_dllm_cache(model, DLLMCacheConfig(prompt_interval=100, response_interval=7))
>>> out = generate(model, ids, mask_id=model.config.mask_token_id, cache=handle.cache)  # doctest: +SKIP
"""

from importlib.metadata import PackageNotFoundError, version

from dllm_cache.adapters import ADAPTERS, BlockAdapter, register_adapter, resolve_adapter
from dllm_cache.block import (
    BlockParts,
    LayerCache,
    RowTables,
    cached_block,
    full_block,
    row_tables,
    select_rows,
    write_rows,
)
from dllm_cache.cache import CacheHandle, CacheStats, DLLMCache, LayerStep, apply_dllm_cache
from dllm_cache.config import PRESETS, DLLMCacheConfig, Preset, dLLMCacheConfig
from dllm_cache.dream import dream_generate, shift_logits
from dllm_cache.flops import (
    LLADA_8B,
    BlockDims,
    RowCounts,
    block_flops,
    case_rows,
    generation_flops,
    refresh_flags,
    schedule,
)
from dllm_cache.model import TinyLLaDA, TinyLLaDAConfig
from dllm_cache.sampler import (
    commit_parallel,
    generate,
    gumbel_argmax,
    llada_generate,
    num_transfer_tokens,
)

try:
    __version__ = version("dllm-cache")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "ADAPTERS",
    "LLADA_8B",
    "PRESETS",
    "BlockAdapter",
    "BlockDims",
    "BlockParts",
    "CacheHandle",
    "CacheStats",
    "DLLMCache",
    "DLLMCacheConfig",
    "LayerCache",
    "LayerStep",
    "Preset",
    "RowCounts",
    "RowTables",
    "TinyLLaDA",
    "TinyLLaDAConfig",
    "__version__",
    "apply_dllm_cache",
    "block_flops",
    "cached_block",
    "case_rows",
    "commit_parallel",
    "dLLMCacheConfig",
    "dream_generate",
    "full_block",
    "generate",
    "generation_flops",
    "gumbel_argmax",
    "llada_generate",
    "num_transfer_tokens",
    "refresh_flags",
    "register_adapter",
    "resolve_adapter",
    "row_tables",
    "schedule",
    "select_rows",
    "shift_logits",
    "write_rows",
]
