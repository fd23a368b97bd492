"""LLaDA-shaped remote code for the tests, written after GSAI-ML/LLaDA-8B's modeling_llada.py.

The traits that matter for dLLM-Cache: module names (``model.transformer.{wte, blocks, ln_f,
ff_out}``; per block ``attn_norm, q_proj, k_proj, v_proj, attn_out, ff_norm, ff_proj, up_proj,
ff_out, act, rotary_emb``), ``rotary_emb.get_rotary_embedding(T, device) -> (sin, cos)``, RoPE
after the head split in fp32, SDPA called with ``attn_mask=None`` (padding is attended to), and
a forward without ``logits_to_keep`` (the head runs over the whole sequence).
"""

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

from .configuration_llada import LLaDAConfig


class RMSLayerNorm(nn.Module):
    def __init__(self, size, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x):
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


class RotaryEmbedding(nn.Module):
    def __init__(self, head_dim, theta):
        super().__init__()
        self.head_dim, self.theta = head_dim, theta

    def get_rotary_embedding(self, seq_len, device):
        dim = self.head_dim
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, dim, 2, device=device).float() / dim))
        freqs = torch.einsum("i,j->ij", torch.arange(seq_len, device=device).float(), inv_freq)
        positions = torch.cat((freqs, freqs), dim=-1)
        return positions.sin()[None, None, :, :], positions.cos()[None, None, :, :]

    @staticmethod
    def rotate_half(x):
        B, nh, T, hs = x.size()
        x = x.view(B, nh, T, 2, hs // 2)
        x1, x2 = x.unbind(dim=-2)
        return torch.cat((-x2, x1), dim=-1)

    def forward(self, q, k):
        q_, k_ = q.float(), k.float()
        sin, cos = self.get_rotary_embedding(k_.shape[-2], k_.device)
        q_ = q_ * cos + self.rotate_half(q_) * sin
        k_ = k_ * cos + self.rotate_half(k_) * sin
        return q_.type_as(q), k_.type_as(k)


class LLaDALlamaBlock(nn.Module):
    def __init__(self, layer_id, config):
        super().__init__()
        d, hd = config.d_model, config.d_model // config.n_heads
        n_kv = config.effective_n_kv_heads
        self.layer_id, self.config = layer_id, config
        self.attn_norm = RMSLayerNorm(d, config.rms_norm_eps)
        self.ff_norm = RMSLayerNorm(d, config.rms_norm_eps)
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, n_kv * hd, bias=False)
        self.v_proj = nn.Linear(d, n_kv * hd, bias=False)
        self.attn_out = nn.Linear(d, d, bias=False)
        self.ff_proj = nn.Linear(d, config.mlp_hidden_size, bias=False)
        self.up_proj = nn.Linear(d, config.mlp_hidden_size, bias=False)
        self.ff_out = nn.Linear(config.mlp_hidden_size, d, bias=False)
        self.act = nn.SiLU()
        self.rotary_emb = RotaryEmbedding(hd, config.rope_theta)

    def attention(self, q, k, v, attention_bias=None):
        B, T, C = q.size()
        H, n_kv = self.config.n_heads, self.config.effective_n_kv_heads
        q = q.view(B, T, H, C // H).transpose(1, 2)
        k = k.view(B, T, n_kv, C // H).transpose(1, 2)
        v = v.view(B, T, n_kv, C // H).transpose(1, 2)
        q, k = self.rotary_emb(q, k)
        if n_kv != H:
            k = k.repeat_interleave(H // n_kv, dim=1)
            v = v.repeat_interleave(H // n_kv, dim=1)
        # as LLaDA: the bias is built upstream but SDPA gets no mask
        att = F.scaled_dot_product_attention(
            q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False
        )
        return self.attn_out(att.transpose(1, 2).contiguous().view(B, T, C))

    def forward(self, x, attention_bias=None, layer_past=None, use_cache=False):
        x_normed = self.attn_norm(x)
        q, k, v = self.q_proj(x_normed), self.k_proj(x_normed), self.v_proj(x_normed)
        x = x + self.attention(q, k, v, attention_bias)
        og_x = x
        x = self.ff_norm(x)
        x, x_up = self.ff_proj(x), self.up_proj(x)
        x = self.ff_out(self.act(x) * x_up)
        return og_x + x, None


class LLaDAModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(config.embedding_size, config.d_model),
                emb_drop=nn.Dropout(0.0),
                ln_f=RMSLayerNorm(config.d_model, config.rms_norm_eps),
                blocks=nn.ModuleList(LLaDALlamaBlock(i, config) for i in range(config.n_layers)),
                ff_out=nn.Linear(config.d_model, config.embedding_size, bias=False),
            )
        )

    def forward(self, input_ids, attention_mask=None):
        x = self.transformer.emb_drop(self.transformer.wte(input_ids))
        bias = None
        if attention_mask is not None:  # built as LLaDA does, then not used by SDPA
            bias = (1.0 - attention_mask[:, None, None, :].float()) * torch.finfo(torch.float).min
        for block in self.transformer.blocks:
            x, _ = block(x, attention_bias=bias)
        x = self.transformer.ln_f(x)
        return self.transformer.ff_out(x)


class LLaDAModelLM(PreTrainedModel):
    config_class = LLaDAConfig
    base_model_prefix = "model"

    def __init__(self, config):
        super().__init__(config)
        self.model = LLaDAModel(config)
        self.post_init()

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.1)

    def forward(self, input_ids=None, attention_mask=None, return_dict=None, **kwargs):
        return CausalLMOutputWithPast(logits=self.model(input_ids, attention_mask))
