"""Adapters: where a model keeps its blocks and how to call their parts one by one.

``"llada"`` (``GSAI-ML/LLaDA-8B-*`` remote code and :class:`~dllm_cache.TinyLLaDA`), ``"llama"``
(Hugging Face ``LlamaDecoderLayer``-style layers: Llama, Qwen2, Mistral ... made bidirectional)
and ``"dream"`` (``Dream-org/Dream-v0-*``: Qwen2-style layers that return a tuple).
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Sequence
from typing import Any

from torch import Tensor

from dllm_cache.block import BlockParts
from dllm_cache.flops import BlockDims


def _missing(root: Any, paths: Sequence[str]) -> list[str]:
    out = []
    for path in paths:
        try:
            operator.attrgetter(path)(root)
        except AttributeError:
            out.append(path)
    return out


def _accepts(model: Any, name: str) -> bool:
    try:
        return name in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


class BlockAdapter:
    """How dLLM-Cache reaches into one architecture. Subclass and register with :func:`register_adapter`.

    ``blocks_path``: attribute path from the model to its list of blocks; ``block_attrs``: the
    submodules every block must have.
    """

    name: str = ""
    blocks_path: str = ""
    block_attrs: tuple[str, ...] = ()

    def missing(self, model: Any) -> list[str]:
        """Attribute names this adapter needs that ``model`` lacks (empty when it fits)."""
        missing = _missing(model, [self.blocks_path])
        if missing:
            return missing
        blocks = self.blocks(model)
        if len(blocks) == 0:
            return [f"{self.blocks_path}[0]"]
        return [f"{self.blocks_path}[i].{a}" for a in _missing(blocks[0], self.block_attrs)]

    def blocks(self, model: Any) -> Sequence[Any]:
        return operator.attrgetter(self.blocks_path)(model)

    def check(self, model: Any) -> None:
        """Raise when the model cannot run cached (for instance, causal attention)."""

    def parts(self, model: Any, block: Any) -> BlockParts:
        raise NotImplementedError

    def hidden_states(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Tensor:
        return args[0] if args else kwargs["hidden_states"]

    def rotary(
        self,
        model: Any,
        block: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        h: Tensor,
    ) -> tuple[Tensor, Tensor]:
        """``(cos, sin)`` of shape (1|B)×T×head_dim for the block's input ``h``."""
        raise NotImplementedError

    def wrap(self, out: Tensor) -> Any:
        """The block's return value around the new hidden states."""
        return out

    def honours_padding(self, model: Any) -> bool:
        """Whether the model's own attention hides padding keys (``config.padding="model"``)."""
        return True

    def head_input(self, model: Any) -> Any | None:
        """The module whose output the LM head reads, when the model's forward takes no
        ``logits_to_keep``: the cache then feeds it the response rows only (``None``: no need)."""
        return None


class LLaDAAdapter(BlockAdapter):
    name = "llada"
    blocks_path = "model.transformer.blocks"
    block_attrs = (
        "attn_norm", "q_proj", "k_proj", "v_proj", "attn_out",
        "ff_norm", "ff_proj", "up_proj", "ff_out", "act", "rotary_emb",
    )  # fmt: skip

    def check(self, model: Any) -> None:
        block = self.blocks(model)[0]
        if getattr(block, "q_norm", None) is not None or getattr(block, "k_norm", None) is not None:
            raise NotImplementedError("the llada adapter does not support blocks with QK-norm")

    def parts(self, model: Any, block: Any) -> BlockParts:
        c = model.config
        n_kv = getattr(c, "effective_n_kv_heads", None) or c.n_kv_heads or c.n_heads

        def mlp(x: Tensor) -> Tensor:
            x, x_up = block.ff_proj(x), block.up_proj(x)
            return block.ff_out(block.act(x) * x_up)

        dims = BlockDims(
            c.d_model, c.n_heads, n_kv, c.d_model // c.n_heads, block.ff_proj.out_features
        )
        return BlockParts(
            block.attn_norm,
            block.q_proj,
            block.k_proj,
            block.v_proj,
            block.attn_out,
            block.ff_norm,
            mlp,
            dims,
        )

    def rotary(
        self, model: Any, block: Any, args: tuple[Any, ...], kwargs: dict[str, Any], h: Tensor
    ) -> tuple[Tensor, Tensor]:
        sin, cos = block.rotary_emb.get_rotary_embedding(h.shape[1], h.device)
        return cos[:, 0], sin[:, 0]

    def wrap(self, out: Tensor) -> Any:
        return out, None

    def honours_padding(self, model: Any) -> bool:
        # LLaDA's remote code builds an attention bias but calls SDPA with attn_mask=None, so an
        # uncached LLaDA attends to padding; TinyLLaDA says it hides it.
        return bool(getattr(model, "honours_attention_mask", False))

    def head_input(self, model: Any) -> Any | None:
        # LLaDAModelLM.forward takes no logits_to_keep: its 126k-row head would run over the
        # whole sequence on every step. Its LM head reads transformer.ln_f's output.
        if _accepts(model, "logits_to_keep"):
            return None
        return operator.attrgetter("model.transformer.ln_f")(model)


class LlamaAdapter(BlockAdapter):
    name = "llama"
    blocks_path = "model.layers"
    block_attrs = (
        "input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
        "self_attn.o_proj", "post_attention_layernorm", "mlp",
    )  # fmt: skip

    def check(self, model: Any) -> None:
        if getattr(model.config, "is_causal", True) is not False:
            raise ValueError(
                f"{type(model).__name__} runs causal attention; dLLM-Cache needs a bidirectional "
                "model (set config.is_causal = False and every attention module's is_causal, e.g. "
                "with shared_core.models.set_bidirectional)"
            )

    def parts(self, model: Any, block: Any) -> BlockParts:
        c, attn = model.config, block.self_attn
        head_dim = getattr(attn, "head_dim", None) or c.hidden_size // c.num_attention_heads
        n_kv = getattr(c, "num_key_value_heads", None) or c.num_attention_heads
        dims = BlockDims(c.hidden_size, c.num_attention_heads, n_kv, head_dim, c.intermediate_size)
        return BlockParts(
            block.input_layernorm, attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj,
            block.post_attention_layernorm, block.mlp, dims,
        )  # fmt: skip

    def rotary(
        self, model: Any, block: Any, args: tuple[Any, ...], kwargs: dict[str, Any], h: Tensor
    ) -> tuple[Tensor, Tensor]:
        pe = kwargs.get("position_embeddings")
        if pe is None:
            raise ValueError(f"{type(block).__name__} was called without position_embeddings")
        return pe


class DreamAdapter(LlamaAdapter):
    """Dream-v0 (Qwen2 layers): like ``"llama"``, but its layers return a tuple."""

    name = "dream"

    def check(self, model: Any) -> None:
        # Dream's remote code is bidirectional by construction and keeps no is_causal flag.
        return None

    def wrap(self, out: Tensor) -> Any:
        return (out,)


ADAPTERS: dict[str, BlockAdapter] = {}


def register_adapter(adapter: BlockAdapter) -> BlockAdapter:
    """Make ``adapter`` available by its ``name`` (and to ``adapter="auto"``)."""
    if not adapter.name:
        raise ValueError("an adapter needs a non-empty name")
    ADAPTERS[adapter.name] = adapter
    return adapter


for _adapter in (LLaDAAdapter(), LlamaAdapter(), DreamAdapter()):
    register_adapter(_adapter)


def resolve_adapter(model: Any, adapter: str | BlockAdapter = "auto") -> BlockAdapter:
    """The adapter to use for ``model``; raises naming the missing modules when none fits."""
    if isinstance(adapter, BlockAdapter):
        chosen = adapter
    elif adapter == "auto":
        model_type = str(getattr(getattr(model, "config", None), "model_type", ""))
        fitting = [a for a in ADAPTERS.values() if not a.missing(model)]
        # Dream and Llama share module names; Dream's config says model_type "Dream".
        by_type = [a for a in fitting if a.name in model_type.lower()]
        if not fitting:
            report = "; ".join(
                f"{n}: lacks {', '.join(a.missing(model))}" for n, a in ADAPTERS.items()
            )
            raise ValueError(
                f"no adapter fits {type(model).__name__} ({report}); "
                f"available adapters: {sorted(ADAPTERS)}"
            )
        chosen = (by_type or fitting)[0]
    elif adapter in ADAPTERS:
        chosen = ADAPTERS[adapter]
    else:
        raise ValueError(f"unknown adapter {adapter!r}; available adapters: {sorted(ADAPTERS)}")
    missing = chosen.missing(model)
    if missing:
        raise ValueError(
            f"{type(model).__name__} lacks the modules the {chosen.name!r} adapter needs: "
            f"{', '.join(missing)}; available adapters: {sorted(ADAPTERS)}"
        )
    chosen.check(model)
    return chosen
