"""Graphormer node encoder with DGL's semantics, in plain torch.

Re-implements what ``dial/model.py`` takes from DGL (``DegreeEncoder``, ``SpatialEncoder``,
``PathEncoder``, ``GraphormerLayer`` with ``BiasedMHA``), following DGL 2.x's definitions: the same
embedding sizes, clamps, padding indices, post-LayerNorm layout and initialisation.
"""

from __future__ import annotations

import torch
from torch import nn

from afrnet.features import GraphFeatures


class BiasedMHA(nn.Module):
    """Multi-head attention with an additive per-head bias and a boolean key mask (DGL's)."""

    def __init__(self, feat_size: int, num_heads: int, attn_dropout: float = 0.1) -> None:
        super().__init__()
        if feat_size % num_heads:
            raise ValueError(f"d_model = {feat_size} must be divisible by nhead = {num_heads}")
        self.num_heads = num_heads
        self.head_dim = feat_size // num_heads
        self.scaling = self.head_dim**-0.5
        self.q_proj = nn.Linear(feat_size, feat_size)
        self.k_proj = nn.Linear(feat_size, feat_size)
        self.v_proj = nn.Linear(feat_size, feat_size)
        self.out_proj = nn.Linear(feat_size, feat_size)
        self.dropout = nn.Dropout(attn_dropout)
        for proj in (self.q_proj, self.k_proj, self.v_proj):
            nn.init.xavier_uniform_(proj.weight, gain=2**-0.5)
        nn.init.xavier_uniform_(self.out_proj.weight)
        if self.out_proj.bias is not None:
            nn.init.constant_(self.out_proj.bias, 0.0)

    def forward(
        self, x: torch.Tensor, bias: torch.Tensor, key_mask: torch.Tensor | None
    ) -> torch.Tensor:
        b, n, d = x.shape
        h, hd = self.num_heads, self.head_dim
        q = (self.q_proj(x) * self.scaling).reshape(b, n, h, hd).transpose(1, 2)
        k = self.k_proj(x).reshape(b, n, h, hd).transpose(1, 2)
        v = self.v_proj(x).reshape(b, n, h, hd).transpose(1, 2)
        scores = q @ k.transpose(-1, -2) + bias.permute(0, 3, 1, 2)
        if key_mask is not None:
            scores = scores.masked_fill(key_mask[:, None, None, :], float("-inf"))
        attn = self.dropout(torch.softmax(scores, dim=-1))
        return self.out_proj((attn @ v).transpose(1, 2).reshape(b, n, d))


class GraphormerLayer(nn.Module):
    """DGL's ``GraphormerLayer`` with ``norm_first=False``: attention and FFN, each residual +
    LayerNorm."""

    def __init__(
        self, feat_size: int, hidden_size: int, num_heads: int, dropout: float, attn_dropout: float
    ) -> None:
        super().__init__()
        self.attn = BiasedMHA(feat_size, num_heads, attn_dropout)
        self.ffn = nn.Sequential(
            nn.Linear(feat_size, hidden_size),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(hidden_size, feat_size),
            nn.Dropout(dropout),
        )
        self.dropout = nn.Dropout(dropout)
        self.attn_layer_norm = nn.LayerNorm(feat_size)
        self.ffn_layer_norm = nn.LayerNorm(feat_size)

    def forward(
        self, x: torch.Tensor, bias: torch.Tensor, key_mask: torch.Tensor | None
    ) -> torch.Tensor:
        x = self.attn_layer_norm(x + self.dropout(self.attn(x, bias, key_mask)))
        return self.ffn_layer_norm(x + self.ffn(x))


class GraphormerNodeEncoder(nn.Module):
    """``H = LN(Graphormer(MLP(F rows) + DegEmb, bias = spatial + path))`` with a graph token.

    ``num_nodes`` is the width of the FC rows the MLP reads (the padded N of a batch).
    """

    def __init__(
        self,
        num_nodes: int,
        *,
        d_model: int = 64,
        nhead: int = 4,
        num_layers: int = 2,
        dim_feedforward: int = 128,
        dropout: float = 0.3,
        attn_dropout: float = 0.1,
        max_degree: int = 511,
        max_dist: int = 510,
        max_path_len: int = 5,
    ) -> None:
        super().__init__()
        self.nhead = nhead
        self.max_degree = max_degree
        self.max_dist = max_dist
        self.max_path_len = max_path_len
        self.fc_feature_proj = nn.Sequential(
            nn.Linear(num_nodes, 2 * d_model),
            nn.LayerNorm(2 * d_model),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(2 * d_model, d_model),
        )
        self.degree_embedding = nn.Embedding(max_degree + 1, d_model, padding_idx=0)
        self.spatial_embedding = nn.Embedding(max_dist + 2, nhead, padding_idx=0)
        # DGL's PathEncoder: an Embedding(max_len * heads, feat_dim) read as [max_len, heads, feat].
        self.path_embedding = nn.Embedding(max_path_len * nhead, 1)
        self.graph_token = nn.Embedding(1, d_model)
        self.graph_token_virtual_distance = nn.Embedding(1, nhead)
        self.layers = nn.ModuleList(
            GraphormerLayer(d_model, dim_feedforward, nhead, dropout, attn_dropout)
            for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(d_model)

    def attention_bias(self, features: GraphFeatures) -> torch.Tensor:
        """Spatial + path bias ``[B, N + 1, N + 1, heads]`` with the graph token's row and column."""
        spd = features.spd
        b, n = spd.shape[0], spd.shape[-1]
        spatial = self.spatial_embedding(spd.clamp(-1, self.max_dist) + 1)
        paths = features.paths[..., : self.max_path_len]
        if paths.shape[-1] < self.max_path_len:
            paths = nn.functional.pad(paths, (0, self.max_path_len - paths.shape[-1]))
        weights = self.path_embedding.weight.reshape(self.max_path_len, self.nhead)
        path = torch.einsum("bxyl,lh->bxyh", paths.to(weights.dtype), weights)
        path = path / spd.clamp(1, self.max_path_len)[..., None].to(path.dtype)
        bias = torch.zeros(b, n + 1, n + 1, self.nhead, dtype=path.dtype, device=path.device)
        bias[:, 1:, 1:] = spatial + path
        t = self.graph_token_virtual_distance.weight.reshape(1, 1, self.nhead)
        bias[:, 1:, 0] = bias[:, 1:, 0] + t
        bias[:, 0] = bias[:, 0] + t
        return bias

    def forward(
        self, fc: torch.Tensor, features: GraphFeatures, node_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        b = fc.shape[0]
        degree = (features.degree + 1).clamp(0, self.max_degree)
        if node_mask is not None:
            degree = degree * node_mask  # padded nodes read the padding row 0, as DGL's collate
        h = self.fc_feature_proj(fc) + self.degree_embedding(degree)
        h = torch.cat([self.graph_token.weight.expand(b, 1, -1), h], dim=1)
        bias = self.attention_bias(features)
        key_mask = None
        if node_mask is not None:
            key_mask = torch.cat([node_mask.new_ones(b, 1), node_mask], dim=1).logical_not()
        for layer in self.layers:
            h = layer(h, bias, key_mask)
        return self.norm(h[:, 1:])
