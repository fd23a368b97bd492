"""``TinyLLaDA``: LLaDA's architecture and module names at toy width, as a transformers model.

A LLaMA decoder without the causal mask (RMSNorm, SwiGLU, RoPE, no biases) laid out like
``GSAI-ML/LLaDA-8B``'s remote code: ``model.transformer.{wte, blocks, ln_f, ff_out}`` and, in each
block, ``attn_norm, q_proj, k_proj, v_proj, attn_out, ff_norm, ff_proj, up_proj, ff_out,
rotary_emb``, with the config field names of ``LLaDAConfig``. So the ``"llada"`` adapter runs
on it exactly as on the real checkpoint, and ``save_pretrained``/``from_pretrained`` work locally.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutput

from dllm_cache.block import BlockParts, full_block
from dllm_cache.flops import BlockDims


class TinyLLaDAConfig(PretrainedConfig):
    """LLaDA's config fields (``d_model``, ``n_heads``, ``n_layers``, ``mlp_hidden_size`` ...)."""

    model_type = "tiny_llada"

    def __init__(
        self,
        vocab_size: int = 32,
        d_model: int = 64,
        n_heads: int = 4,
        n_kv_heads: int | None = None,
        n_layers: int = 4,
        mlp_hidden_size: int = 192,
        rope_theta: float = 10000.0,
        rms_norm_eps: float = 1e-5,
        max_sequence_length: int = 4096,
        init_std: float = 0.02,
        mask_token_id: int = 3,
        pad_token_id: int = 0,
        bos_token_id: int = 1,
        eos_token_id: int = 2,
        **kwargs: Any,
    ) -> None:
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        n_kv_heads = n_kv_heads or n_heads
        if n_heads % n_kv_heads:
            raise ValueError(f"n_heads={n_heads} is not a multiple of n_kv_heads={n_kv_heads}")
        if mask_token_id == pad_token_id:
            raise ValueError(
                f"mask_token_id and pad_token_id must differ, both are {mask_token_id}"
            )
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads
        self.n_layers = n_layers
        self.mlp_hidden_size = mlp_hidden_size
        self.rope_theta = rope_theta
        self.rms_norm_eps = rms_norm_eps
        self.max_sequence_length = max_sequence_length
        self.init_std = init_std
        self.mask_token_id = mask_token_id
        super().__init__(**kwargs)
        # transformers 5 no longer takes the special ids as named arguments: set them after.
        self.pad_token_id = pad_token_id
        self.bos_token_id = bos_token_id
        self.eos_token_id = eos_token_id

    @property
    def effective_n_kv_heads(self) -> int:
        return self.n_kv_heads


class RMSLayerNorm(nn.Module):
    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


class RotaryEmbedding(nn.Module):
    """LLaDA's rotary tables: ``get_rotary_embedding(T, device) -> (sin, cos)``, each 1×1×T×hd."""

    def __init__(self, head_dim: int, theta: float) -> None:
        super().__init__()
        self.head_dim = head_dim
        self.theta = theta

    def get_rotary_embedding(self, seq_len: int, device: torch.device) -> tuple[Tensor, Tensor]:
        inv_freq = 1.0 / (
            self.theta
            ** (torch.arange(0, self.head_dim, 2, device=device, dtype=torch.float) / self.head_dim)
        )
        seq = torch.arange(seq_len, device=device, dtype=torch.float)
        freqs = torch.outer(seq, inv_freq)
        positions = torch.cat((freqs, freqs), dim=-1)
        return positions.sin()[None, None], positions.cos()[None, None]


class LLaDALlamaBlock(nn.Module):
    """One LLaDA block: pre-norm bidirectional attention and a SwiGLU FFN, no biases."""

    def __init__(self, config: TinyLLaDAConfig, layer_id: int) -> None:
        super().__init__()
        d, hd = config.d_model, config.d_model // config.n_heads
        self.layer_id = layer_id
        self.config = config
        self.attn_norm = RMSLayerNorm(d, config.rms_norm_eps)
        self.ff_norm = RMSLayerNorm(d, config.rms_norm_eps)
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, config.n_kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(d, config.n_kv_heads * hd, bias=False)
        self.attn_out = nn.Linear(d, d, bias=False)
        self.ff_proj = nn.Linear(d, config.mlp_hidden_size, bias=False)
        self.up_proj = nn.Linear(d, config.mlp_hidden_size, bias=False)
        self.ff_out = nn.Linear(config.mlp_hidden_size, d, bias=False)
        self.act = nn.SiLU()
        self.rotary_emb = RotaryEmbedding(hd, config.rope_theta)
        self.q_norm = self.k_norm = None  # LLaDA's optional QK-norm, off as in LLaDA-8B

    def mlp(self, x: Tensor) -> Tensor:
        """SwiGLU on the normalised input, in LLaDA's order: ``ff_out(act(ff_proj(x)) * up_proj(x))``."""
        x, x_up = self.ff_proj(x), self.up_proj(x)
        return self.ff_out(self.act(x) * x_up)

    def parts(self) -> BlockParts:
        c = self.config
        dims = BlockDims(
            c.d_model, c.n_heads, c.n_kv_heads, c.d_model // c.n_heads, c.mlp_hidden_size
        )
        return BlockParts(
            self.attn_norm,
            self.q_proj,
            self.k_proj,
            self.v_proj,
            self.attn_out,
            self.ff_norm,
            self.mlp,
            dims,
        )

    def forward(self, x: Tensor, attention_bias: Tensor | None = None) -> tuple[Tensor, None]:
        """``attention_bias``: B×T key mask (``True`` = attend) or ``None``; returns ``(x, None)`` like LLaDA."""
        sin, cos = self.rotary_emb.get_rotary_embedding(x.shape[1], x.device)
        out, _ = full_block(self.parts(), x, cos[:, 0], sin[:, 0], attention_bias)
        return out, None


class TinyLLaDAModel(nn.Module):
    def __init__(self, config: TinyLLaDAConfig) -> None:
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(
            {
                "wte": nn.Embedding(config.vocab_size, config.d_model),
                "blocks": nn.ModuleList(LLaDALlamaBlock(config, i) for i in range(config.n_layers)),
                "ln_f": RMSLayerNorm(config.d_model, config.rms_norm_eps),
                "ff_out": nn.Linear(config.d_model, config.vocab_size, bias=False),
            }
        )


class TinyLLaDA(PreTrainedModel):
    """LLaDA at toy width: ``model(input_ids, attention_mask=None, logits_to_keep=0).logits``.

    ``attention_mask`` (B×T, 1 = token, 0 = padding) hides padding keys; ``logits_to_keep=n``
    computes logits for the last ``n`` positions only (the response, in :func:`generate`).
    """

    config_class = TinyLLaDAConfig
    base_model_prefix = "model"
    _no_split_modules = ["LLaDALlamaBlock"]  # noqa: RUF012 (transformers declares it per instance)
    #: unlike LLaDA's remote code, TinyLLaDA hides padding keys (read by the llada adapter)
    honours_attention_mask = True

    def __init__(self, config: TinyLLaDAConfig) -> None:
        super().__init__(config)
        self.model = TinyLLaDAModel(config)
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=self.config.init_std)
        elif isinstance(module, RMSLayerNorm):
            nn.init.ones_(module.weight)

    def get_input_embeddings(self) -> nn.Module:
        return self.model.transformer["wte"]

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        logits_to_keep: int = 0,
        **kwargs: Any,
    ) -> CausalLMOutput:
        t = self.model.transformer
        x = t["wte"](input_ids)
        key_mask = None
        if attention_mask is not None and not bool(attention_mask.all()):
            key_mask = attention_mask.bool()
        for block in t["blocks"]:
            x, _ = block(x, key_mask)
        if logits_to_keep:
            x = x[:, -logits_to_keep:]
        return CausalLMOutput(logits=t["ff_out"](t["ln_f"](x)))
