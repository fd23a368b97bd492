"""Transformer shapes the roofline prices: layer widths, heads, vocabulary, tensor parallelism, dtypes."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any


@dataclasses.dataclass(frozen=True)
class ModelShape:
    """A dense decoder-only transformer (Llama/Qwen3 family: GQA attention, SwiGLU MLP).

    ``d_head * n_heads`` need not equal ``d_model`` (Qwen3 sets ``head_dim`` explicitly). ``tp`` is
    the tensor-parallel degree: weights, heads and the MLP are split ``tp`` ways and two all-reduces
    per layer join them. ``bytes_w``, ``bytes_act`` and ``bytes_kv`` are the element sizes of weights,
    activations and the KV cache (2 for bf16).
    """

    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    d_ff: int
    vocab: int
    tp: int = 1
    bytes_w: int = 2
    bytes_act: int = 2
    bytes_kv: int = 2
    name: str = "model"

    def __post_init__(self) -> None:
        sizes = {
            "n_layers": self.n_layers,
            "d_model": self.d_model,
            "n_heads": self.n_heads,
            "n_kv_heads": self.n_kv_heads,
            "d_head": self.d_head,
            "d_ff": self.d_ff,
            "vocab": self.vocab,
            "tp": self.tp,
            "bytes_w": self.bytes_w,
            "bytes_act": self.bytes_act,
            "bytes_kv": self.bytes_kv,
        }
        bad = {
            k: v
            for k, v in sizes.items()
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0
        }
        if bad:
            raise ValueError(f"model shape sizes must be positive integers, got {bad}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_kv_heads={self.n_kv_heads} must divide n_heads={self.n_heads} (grouped-query "
                "attention shares each KV head among a whole number of query heads)"
            )
        if self.n_heads % self.tp:
            raise ValueError(f"tp={self.tp} must divide n_heads={self.n_heads}")
        if self.n_kv_heads % self.tp and self.tp % self.n_kv_heads:
            raise ValueError(
                f"tp={self.tp} and n_kv_heads={self.n_kv_heads}: one must divide the other "
                "(KV heads are split across ranks, or replicated when there are fewer than ranks)"
            )
        if self.d_ff % self.tp:
            raise ValueError(f"tp={self.tp} must divide d_ff={self.d_ff}")

    @property
    def heads_per_rank(self) -> int:
        return self.n_heads // self.tp

    @property
    def kv_heads_per_rank(self) -> int:
        return max(self.n_kv_heads // self.tp, 1)

    @property
    def kv_bytes_per_token(self) -> int:
        """KV-cache bytes one token takes on one rank, all layers (K and V)."""
        return 2 * self.n_layers * self.kv_heads_per_rank * self.d_head * self.bytes_kv

    @property
    def weight_bytes_per_rank(self) -> int:
        """Weight bytes one rank holds: attention and MLP projections, embedding and LM head."""
        d, dh = self.d_model, self.d_head
        attn = (
            d * (self.heads_per_rank + 2 * self.kv_heads_per_rank) * dh
            + self.heads_per_rank * dh * d
        )
        mlp = 3 * d * self.d_ff // self.tp
        embed = 2 * d * self.vocab // self.tp  # untied input embedding and LM head
        return (self.n_layers * (attn + mlp) + embed) * self.bytes_w

    def with_tp(self, tp: int) -> ModelShape:
        return dataclasses.replace(self, tp=tp)

    @classmethod
    def from_hf_config(
        cls, config: Mapping[str, Any] | Any, *, tp: int = 1, **kwargs: Any
    ) -> ModelShape:
        """Read a Hugging Face ``config.json`` (a dict, or a ``PretrainedConfig``-like object).

        ``head_dim`` defaults to ``hidden_size // num_attention_heads`` and ``num_key_value_heads`` to
        ``num_attention_heads`` as in transformers; a multimodal config's ``text_config`` is used.
        """

        def get(key: str, default: Any = None) -> Any:
            if isinstance(config, Mapping):
                return config.get(key, default)
            return getattr(config, key, default)

        text = get("text_config", None)
        if text is not None:
            return cls.from_hf_config(text, tp=tp, **kwargs)
        needed = [
            "num_hidden_layers",
            "hidden_size",
            "num_attention_heads",
            "intermediate_size",
            "vocab_size",
        ]
        missing = [k for k in needed if get(k, None) is None]
        if missing:
            raise ValueError(f"config lacks {missing}; is it a decoder-only transformer config?")
        n_heads = int(get("num_attention_heads"))
        d_model = int(get("hidden_size"))
        d_head = get("head_dim", None)
        if d_head is None:
            d_head = d_model // n_heads
        if isinstance(d_head, bool) or float(d_head) != int(d_head) or int(d_head) <= 0:
            raise ValueError(f"head_dim must be a positive integer, got {d_head!r}")
        return cls(
            n_layers=int(get("num_hidden_layers")),
            d_model=d_model,
            n_heads=n_heads,
            n_kv_heads=int(get("num_key_value_heads", None) or n_heads),
            d_head=int(d_head),
            d_ff=int(get("intermediate_size")),
            vocab=int(get("vocab_size")),
            tp=tp,
            name=str(kwargs.pop("name", get("_name_or_path", None) or get("model_type", "model"))),
            **kwargs,
        )

    @classmethod
    def qwen3_8b(cls, tp: int = 1) -> ModelShape:
        """Qwen/Qwen3-8B ``config.json``: 36 layers, hidden 4096, 32 heads / 8 KV heads of 128,
        intermediate 12288, vocabulary 151936, untied embeddings."""
        return cls.from_hf_config(QWEN3_8B_CONFIG, tp=tp, name="Qwen3-8B")

    @classmethod
    def qwen3_14b(cls, tp: int = 1) -> ModelShape:
        """Qwen/Qwen3-14B ``config.json``: 40 layers, hidden 5120, 40 heads / 8 KV heads of 128,
        intermediate 17408, vocabulary 151936, untied embeddings."""
        return cls.from_hf_config(QWEN3_14B_CONFIG, tp=tp, name="Qwen3-14B")


# The fields of the published Hugging Face configs that the roofline reads.
QWEN3_8B_CONFIG: dict[str, Any] = {
    "model_type": "qwen3",
    "num_hidden_layers": 36,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 12288,
    "vocab_size": 151936,
    "tie_word_embeddings": False,
}
QWEN3_14B_CONFIG: dict[str, Any] = {
    "model_type": "qwen3",
    "num_hidden_layers": 40,
    "hidden_size": 5120,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 17408,
    "vocab_size": 151936,
    "tie_word_embeddings": False,
}
