"""The official baselines (``baselines/models.py``) on AFR-Net's data API.

Dual-stream models encode FC and SC separately (node features = adjacency rows), mean-pool, concatenate
and share one head. The graph convolutions are dense pure-torch versions of torch-geometric's
``GCNConv(normalize=False, add_self_loops=False)`` (FC is signed: the symmetric normalisation takes
square roots of negative degrees, torch-geometric issue #795), ``GATConv``, ``GINConv(train_eps=True)``
and ``SAGEConv`` (mean), with self-loops of weight 1 added as the official code does. With
``backend="pyg"`` the same encoders run on torch-geometric's layers (the ``peers`` extra).
FC-only and SC-only logistic regression take the upper triangles.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from afrnet.encoder import GraphormerNodeEncoder
from afrnet.features import GraphFeatures, batch_features

Kind = Literal["gcn", "gat", "gin", "sage"]
KINDS = ("gcn", "gat", "gin", "sage")


def graph_adjacency(adj: torch.Tensor) -> torch.Tensor:
    """The official edge set: ``|w| > 1e-6``, self-loops replaced by weight 1 (batched)."""
    eye = torch.eye(adj.shape[-1], dtype=adj.dtype, device=adj.device)
    off = torch.where(adj.abs() > 1e-6, adj, torch.zeros_like(adj)) * (1 - eye)
    return off + eye


class DenseGCNConv(nn.Module):
    """``A X W + b`` with the raw (signed) weights: ``GCNConv(normalize=False)``."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.lin = nn.Linear(in_dim, out_dim, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_dim))

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        return adj.transpose(-1, -2) @ self.lin(x) + self.bias


class DenseSAGEConv(nn.Module):
    """``lin_l(mean of neighbours) + lin_r(x)`` over the unweighted graph (``SAGEConv``)."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.lin_l = nn.Linear(in_dim, out_dim)
        self.lin_r = nn.Linear(in_dim, out_dim, bias=False)

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        links = (adj != 0).to(x.dtype).transpose(-1, -2)
        mean = links @ x / links.sum(-1, keepdim=True).clamp_min(1)
        return self.lin_l(mean) + self.lin_r(x)


class DenseGINConv(nn.Module):
    """``mlp((1 + ε) x + Σ_neighbours x)`` over the unweighted graph, ε learnable (``GINConv``)."""

    def __init__(self, mlp: nn.Module) -> None:
        super().__init__()
        self.nn = mlp
        self.eps = nn.Parameter(torch.zeros(1))

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        links = (adj != 0).to(x.dtype).transpose(-1, -2)
        out = (1 + self.eps) * x + links @ x
        return _batchnorm_nodes(self.nn, out)


class DenseGATConv(nn.Module):
    """Graph attention over the unweighted graph with self-loops (``GATConv``, slope 0.2)."""

    def __init__(self, in_dim: int, out_dim: int, heads: int, concat: bool, dropout: float) -> None:
        super().__init__()
        self.heads, self.out_dim, self.concat = heads, out_dim, concat
        self.lin = nn.Linear(in_dim, heads * out_dim, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, 1, heads, out_dim))
        self.att_dst = nn.Parameter(torch.empty(1, 1, heads, out_dim))
        self.bias = nn.Parameter(torch.zeros(heads * out_dim if concat else out_dim))
        self.dropout = nn.Dropout(dropout)
        nn.init.xavier_uniform_(self.lin.weight)
        nn.init.xavier_uniform_(self.att_src)
        nn.init.xavier_uniform_(self.att_dst)

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        h = self.lin(x).reshape(b, n, self.heads, self.out_dim)
        src = (h * self.att_src).sum(-1)  # [B, N, H]
        dst = (h * self.att_dst).sum(-1)
        scores = nn.functional.leaky_relu(dst[:, :, None] + src[:, None, :], 0.2)  # [B, i, j, H]
        links = (adj != 0).transpose(-1, -2)[..., None]  # j -> i
        scores = scores.masked_fill(~links, float("-inf"))
        alpha = self.dropout(torch.softmax(scores, dim=2))
        out = torch.einsum("bijh,bjhc->bihc", alpha, h)
        out = out.reshape(b, n, -1) if self.concat else out.mean(2)
        return out + self.bias


def _batchnorm_nodes(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Apply a module with BatchNorm1d to ``[B, N, F]`` node features (statistics over all nodes)."""
    b, n, f = x.shape
    return module(x.reshape(b * n, f)).reshape(b, n, -1)


class GraphEncoder(nn.Module):
    """Two graph convolutions and a mean pool, as the official ``{GCN,GAT,GIN,SAGE}Encoder``."""

    def __init__(
        self,
        kind: Kind,
        in_dim: int,
        hidden_dim: int,
        embed_dim: int,
        dropout: float,
        heads: int = 4,
    ) -> None:
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        self.kind = kind
        self.dropout = nn.Dropout(dropout)
        self.norms = nn.ModuleList()
        if kind == "gcn":
            self.convs = nn.ModuleList(
                [DenseGCNConv(in_dim, hidden_dim), DenseGCNConv(hidden_dim, embed_dim)]
            )
            self.norms = nn.ModuleList([nn.BatchNorm1d(hidden_dim), nn.BatchNorm1d(embed_dim)])
            self.act: nn.Module = nn.ReLU()
        elif kind == "gat":
            self.convs = nn.ModuleList(
                [
                    DenseGATConv(in_dim, hidden_dim, heads, True, dropout),
                    DenseGATConv(hidden_dim * heads, embed_dim, 1, False, dropout),
                ]
            )
            self.act = nn.ELU()
        elif kind == "sage":
            self.convs = nn.ModuleList(
                [DenseSAGEConv(in_dim, hidden_dim), DenseSAGEConv(hidden_dim, embed_dim)]
            )
            self.act = nn.ReLU()
        else:

            def mlp(a: int, b: int) -> nn.Sequential:
                return nn.Sequential(
                    nn.Linear(a, hidden_dim), nn.BatchNorm1d(hidden_dim), nn.ReLU(),
                    nn.Linear(hidden_dim, b), nn.BatchNorm1d(b), nn.ReLU(),
                )  # fmt: skip

            self.convs = nn.ModuleList(
                [DenseGINConv(mlp(in_dim, hidden_dim)), DenseGINConv(mlp(hidden_dim, embed_dim))]
            )
            self.act = nn.Identity()

    def forward(self, adj: torch.Tensor, node_mask: torch.Tensor | None = None) -> torch.Tensor:
        graph = graph_adjacency(adj)
        if node_mask is not None:
            pair = node_mask[:, :, None] & node_mask[:, None, :]
            graph = graph * pair
        x = adj
        for layer, conv in enumerate(self.convs):
            x = conv(x, graph)
            if self.norms:
                x = _batchnorm_nodes(self.norms[layer], x)
            x = self.act(x)
            if layer == 0:
                x = self.dropout(x)
        if node_mask is None:
            return x.mean(1)
        weights = node_mask.to(x.dtype)[..., None]
        return (x * weights).sum(1) / weights.sum(1)


class PygGraphEncoder(nn.Module):
    """The official encoders on torch-geometric's layers (``pip install 'afrnet[peers]'``)."""

    def __init__(
        self,
        kind: Kind,
        in_dim: int,
        hidden_dim: int,
        embed_dim: int,
        dropout: float,
        heads: int = 4,
    ) -> None:
        super().__init__()
        from torch_geometric import nn as gnn

        self.kind = kind
        self.dropout = nn.Dropout(dropout)
        self.norms = nn.ModuleList()
        self.act: nn.Module = nn.ReLU()
        if kind == "gcn":
            self.convs = nn.ModuleList(
                [gnn.GCNConv(in_dim, hidden_dim, add_self_loops=False, normalize=False),
                 gnn.GCNConv(hidden_dim, embed_dim, add_self_loops=False, normalize=False)]
            )  # fmt: skip
            self.norms = nn.ModuleList([nn.BatchNorm1d(hidden_dim), nn.BatchNorm1d(embed_dim)])
        elif kind == "gat":
            self.convs = nn.ModuleList(
                [gnn.GATConv(in_dim, hidden_dim, heads=heads, dropout=dropout, concat=True),
                 gnn.GATConv(hidden_dim * heads, embed_dim, heads=1, dropout=dropout, concat=False)]
            )  # fmt: skip
            self.act = nn.ELU()
        elif kind == "sage":
            self.convs = nn.ModuleList(
                [gnn.SAGEConv(in_dim, hidden_dim), gnn.SAGEConv(hidden_dim, embed_dim)]
            )
        elif kind == "gin":

            def mlp(a: int, b: int) -> nn.Sequential:
                return nn.Sequential(
                    nn.Linear(a, hidden_dim), nn.BatchNorm1d(hidden_dim), nn.ReLU(),
                    nn.Linear(hidden_dim, b), nn.BatchNorm1d(b), nn.ReLU(),
                )  # fmt: skip

            self.convs = nn.ModuleList(
                [gnn.GINConv(mlp(in_dim, hidden_dim), train_eps=True), gnn.GINConv(mlp(hidden_dim, embed_dim), train_eps=True)]
            )  # fmt: skip
            self.act = nn.Identity()
        else:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        self.pool = gnn.global_mean_pool

    def forward(self, adj: torch.Tensor, node_mask: torch.Tensor | None = None) -> torch.Tensor:
        b, n, _ = adj.shape
        graph = graph_adjacency(adj)
        valid = (
            torch.ones(b, n, dtype=torch.bool, device=adj.device)
            if node_mask is None
            else node_mask
        )
        graph = graph * (valid[:, :, None] & valid[:, None, :])
        bi, src, dst = torch.where(graph != 0)
        edge_index = torch.stack([bi * n + src, bi * n + dst])
        weight = graph[bi, src, dst]
        x = adj.reshape(b * n, n)
        for layer, conv in enumerate(self.convs):
            x = conv(x, edge_index, weight) if self.kind == "gcn" else conv(x, edge_index)
            if self.norms:
                x = self.norms[layer](x)
            x = self.act(x)
            if layer == 0:
                x = self.dropout(x)
        keep = valid.reshape(-1)
        batch = torch.arange(b, device=adj.device).repeat_interleave(n)
        return self.pool(x[keep], batch[keep], size=b)


class BaselineHead(nn.Sequential):
    def __init__(self, in_dim: int, hidden_dim: int, num_classes: int, dropout: float) -> None:
        super().__init__(
            nn.Linear(in_dim, hidden_dim),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(hidden_dim, num_classes),
        )


class DualStreamGNN(nn.Module):
    """Separate FC and SC graph encoders, concatenated pooled embeddings, one head."""

    def __init__(
        self,
        num_nodes: int,
        kind: Kind = "gcn",
        *,
        hidden_dim: int = 64,
        embed_dim: int = 128,
        num_classes: int = 2,
        dropout: float = 0.1,
        heads: int = 4,
        backend: Literal["dense", "pyg"] = "dense",
    ) -> None:
        super().__init__()
        if backend not in ("dense", "pyg"):
            raise ValueError(f"backend must be 'dense' or 'pyg', got {backend!r}")
        enc = GraphEncoder if backend == "dense" else PygGraphEncoder
        self.num_nodes, self.num_classes, self.task = num_nodes, num_classes, "classification"
        self.fc_encoder = enc(kind, num_nodes, hidden_dim, embed_dim, dropout, heads)
        self.sc_encoder = enc(kind, num_nodes, hidden_dim, embed_dim, dropout, heads)
        self.head = BaselineHead(2 * embed_dim, hidden_dim, num_classes, dropout)

    def forward(
        self, sc: torch.Tensor, fc: torch.Tensor, *, node_mask: torch.Tensor | None = None, **_: Any
    ) -> torch.Tensor:
        if sc.dim() == 2:
            sc, fc = sc[None], fc[None]
        _check_width(sc, self.num_nodes)
        return self.head(
            torch.cat([self.fc_encoder(fc, node_mask), self.sc_encoder(sc, node_mask)], -1)
        )


class DualStreamMLP(nn.Module):
    """The official ``MLPBaseline``: an MLP on each flattened matrix, concatenated, one head."""

    def __init__(
        self,
        num_nodes: int,
        *,
        hidden_dim: int = 128,
        embed_dim: int = 128,
        num_classes: int = 2,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        self.num_nodes, self.num_classes, self.task = num_nodes, num_classes, "classification"

        def encoder() -> nn.Sequential:
            return nn.Sequential(
                nn.Flatten(), nn.Linear(num_nodes * num_nodes, hidden_dim), nn.ReLU(), nn.Dropout(dropout),
                nn.Linear(hidden_dim, embed_dim), nn.ReLU(), nn.Dropout(dropout),
            )  # fmt: skip

        self.fc_encoder, self.sc_encoder = encoder(), encoder()
        self.head = BaselineHead(2 * embed_dim, hidden_dim, num_classes, dropout)

    def forward(self, sc: torch.Tensor, fc: torch.Tensor, **_: Any) -> torch.Tensor:
        if sc.dim() == 2:
            sc, fc = sc[None], fc[None]
        _check_width(sc, self.num_nodes)
        return self.head(torch.cat([self.fc_encoder(fc), self.sc_encoder(sc)], -1))


class GraphormerBaseline(nn.Module):
    """AFR-Net's Graphormer node encoder alone, mean-pooled into the head (no routing)."""

    def __init__(
        self,
        num_nodes: int,
        *,
        d_model: int = 64,
        nhead: int = 4,
        num_layers: int = 2,
        dim_feedforward: int = 128,
        num_classes: int = 2,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        self.num_nodes, self.num_classes, self.task = num_nodes, num_classes, "classification"
        self.encoder = GraphormerNodeEncoder(
            num_nodes, d_model=d_model, nhead=nhead, num_layers=num_layers,
            dim_feedforward=dim_feedforward, dropout=dropout,
        )  # fmt: skip
        self.head = BaselineHead(d_model, dim_feedforward // 2, num_classes, 0.2)

    def forward(
        self,
        sc: torch.Tensor,
        fc: torch.Tensor,
        *,
        features: GraphFeatures | None = None,
        node_mask: torch.Tensor | None = None,
        **_: Any,
    ) -> torch.Tensor:
        if sc.dim() == 2:
            sc, fc = sc[None], fc[None]
        _check_width(sc, self.num_nodes)
        feats = features if features is not None else batch_features(sc, node_mask).to(sc.device)
        h = self.encoder(fc, feats, node_mask)
        if node_mask is None:
            return self.head(h.mean(1))
        w = node_mask.to(h.dtype)[..., None]
        return self.head((h * w).sum(1) / w.sum(1))


def _check_width(sc: torch.Tensor, num_nodes: int) -> None:
    if sc.dim() != 3 or sc.shape[-1] != num_nodes or sc.shape[-2] != num_nodes:
        raise ValueError(f"expected [B, {num_nodes}, {num_nodes}] matrices, got {tuple(sc.shape)}")


def upper_triangle(mats: NDArray[np.float64]) -> NDArray[np.float64]:
    """``[B, N(N-1)/2]`` upper-triangle features of ``[B, N, N]`` matrices."""
    n = mats.shape[-1]
    u, v = np.triu_indices(n, 1)
    return np.asarray(mats)[:, u, v]


def logistic_auc(
    train_x: NDArray[np.float64],
    train_y: NDArray[np.int64],
    test_x: NDArray[np.float64],
    test_y: NDArray[np.int64],
    *,
    C: float = 1.0,
) -> float:
    """Test AUC of a standardised L2 logistic regression (the FC-only / SC-only baselines)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    model = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=2000))
    model.fit(train_x, train_y)
    return float(roc_auc_score(test_y, model.predict_proba(test_x)[:, 1]))
