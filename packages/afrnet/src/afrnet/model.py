"""AFR-Net: Graphormer node encoder -> edge conductances -> flow energy -> routing mask ->
masked graph transformer -> prediction head (``dial/model.py``'s ``DIALModel``), batched.

Every subject's edges are kept in one flat list ``(batch, u, v)``, so the edge gate, the energy
(one batched ``torch.linalg`` call) and the mask run without a per-subject Python loop.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import torch
from torch import nn

from afrnet.encoder import GraphormerNodeEncoder
from afrnet.features import GraphFeatures, batch_features
from afrnet.functional import (
    SOLVERS,
    Solver,
    _dense_energy,
    check_connectome,
    check_mask_params,
    check_number,
    check_solver_dtype,
    routing_mask,
)

ATTN_EPS = 1e-9  # log(m + eps) of the official attention bias


@dataclasses.dataclass
class AFROutput:
    """What :class:`AFRNet` returns. The per-subject lists follow the official order of each
    subject's edges (``u < v``, row-major); ``batch``/``edges`` hold the same edges flat."""

    logits: torch.Tensor
    energy: list[torch.Tensor]
    mask: list[torch.Tensor]
    conductance: list[torch.Tensor]
    edge_index: list[torch.Tensor]
    batch: torch.Tensor
    edges: torch.Tensor

    def dense(self, values: torch.Tensor, num_nodes: int) -> torch.Tensor:
        """A flat per-edge quantity (``torch.cat`` of a list field) as symmetric ``[B, N, N]``."""
        b = len(self.edge_index)
        out = values.new_zeros(b, num_nodes, num_nodes)
        out = out.index_put((self.batch, self.edges[0], self.edges[1]), values)
        return out + out.transpose(-1, -2)


class EdgeGate(nn.Module):
    """``a_e = MLP([|H_u - H_v|, H_u ⊙ H_v, S_uv, F_uv])``; the conductance is ``g_e = exp(a_e)``."""

    def __init__(self, d_model: int, hidden_dim: int, dropout: float) -> None:
        super().__init__()
        self.mlp = nn.Sequential(
            nn.Linear(2 * d_model + 2, hidden_dim),
            nn.SiLU(),
            nn.Dropout(dropout),
            nn.Linear(hidden_dim, 1),
        )

    def forward(
        self, h_u: torch.Tensor, h_v: torch.Tensor, s_e: torch.Tensor, f_e: torch.Tensor
    ) -> torch.Tensor:
        phi = torch.cat([(h_u - h_v).abs(), h_u * h_v, s_e[:, None], f_e[:, None]], dim=1)
        return self.mlp(phi).squeeze(1)


class PredictionHead(nn.Module):
    """Mean over nodes -> Dropout(0.1) -> Linear -> ReLU -> Dropout(0.2) -> Linear."""

    def __init__(self, d_model: int, hidden_dim: int, outputs: int, dropout: float = 0.2) -> None:
        super().__init__()
        self.graph_repr_dropout = nn.Dropout(dropout * 0.5)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, hidden_dim),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(hidden_dim, outputs),
        )

    def forward(self, z: torch.Tensor, node_mask: torch.Tensor | None) -> torch.Tensor:
        if node_mask is None:
            pooled = z.mean(dim=1)
        else:
            weights = node_mask.to(z.dtype)[..., None]
            pooled = (z * weights).sum(1) / weights.sum(1)
        return self.mlp(self.graph_repr_dropout(pooled))


def _check_batch(
    sc: torch.Tensor,
    fc: torch.Tensor,
    num_nodes: int,
    node_mask: torch.Tensor | None,
    dtype: torch.dtype,
) -> None:
    if sc.dim() != 3 or sc.shape[-1] != sc.shape[-2] or fc.shape != sc.shape:
        raise ValueError(
            f"sc and fc must both be [B, N, N] (or [N, N]), got {tuple(sc.shape)} and {tuple(fc.shape)}"
        )
    if sc.shape[-1] != num_nodes:
        raise ValueError(
            f"the model was built for N = {num_nodes} regions, got N = {sc.shape[-1]}; pad smaller "
            "subjects to N with zeros and pass node_mask (ConnectomeDataset does)"
        )
    if sc.dtype != dtype or fc.dtype != dtype:
        raise ValueError(
            f"the model is {dtype}, got sc {sc.dtype} and fc {fc.dtype}: cast the inputs "
            f"(.to({dtype})) or the model"
        )
    check_connectome(sc, fc)
    if node_mask is not None:
        if node_mask.shape != sc.shape[:2] or node_mask.dtype != torch.bool:
            raise ValueError(
                f"node_mask must be a bool [B, N] tensor, got {node_mask.dtype} {tuple(node_mask.shape)}"
            )
        sizes = node_mask.sum(1)
        prefix = torch.arange(num_nodes, device=sc.device)[None] < sizes[:, None]
        if not torch.equal(prefix, node_mask):
            raise ValueError("node_mask must mark each subject's real regions first, padding last")
        pad = ~(node_mask[:, :, None] & node_mask[:, None, :])
        if (sc[pad] != 0).any() or (fc[pad] != 0).any():
            raise ValueError("padded regions (node_mask false) must have zero SC and FC")


class AFRNet(nn.Module):
    """Adaptive flow routing over SC (structure) and FC (task), as the official ``DIALModel``.

    ``forward(sc, fc)`` takes ``[B, N, N]`` (or ``[N, N]``) preprocessed SC and filtered FC and returns
    :class:`AFROutput`. ``routing=False`` is the m ≡ 1 ablation: an adjacency-masked transformer
    (energies are still reported, computed without gradient).
    """

    def __init__(
        self,
        num_nodes: int,
        *,
        d_model: int = 64,
        nhead: int = 4,
        num_node_layers: int = 2,
        num_graph_layers: int = 2,
        dim_feedforward: int = 128,
        num_classes: int = 2,
        task: Literal["classification", "regression"] = "classification",
        dropout: float = 0.3,
        tau: float = 8.0,
        lambda_cost: float = 1.0,
        delta: float = 1e-6,
        energy_scale: float = 100.0,
        max_degree: int = 511,
        max_dist: int = 510,
        max_path_len: int = 5,
        solver: Solver = "auto",
        routing: bool = True,
        allow_disconnected: bool = False,
    ) -> None:
        super().__init__()
        if num_nodes < 2:
            raise ValueError(f"num_nodes must be >= 2, got {num_nodes}")
        if task not in ("classification", "regression"):
            raise ValueError(f"task must be 'classification' or 'regression', got {task!r}")
        if task == "classification" and num_classes < 2:
            raise ValueError(f"num_classes must be >= 2 for classification, got {num_classes}")
        if solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
        check_mask_params(tau, lambda_cost)
        check_number("delta", delta)
        check_number("energy_scale", energy_scale, strict=True)
        self.num_nodes = num_nodes
        self.nhead = nhead
        self.task = task
        self.num_classes = num_classes
        self.tau = tau
        self.lambda_cost = lambda_cost
        self.delta = delta
        self.energy_scale = energy_scale
        self.max_dist = max_dist
        self.max_path_len = max_path_len
        self.solver: Solver = solver
        self.use_routing = routing
        self.allow_disconnected = allow_disconnected
        self.node_encoder = GraphormerNodeEncoder(
            num_nodes,
            d_model=d_model,
            nhead=nhead,
            num_layers=num_node_layers,
            dim_feedforward=dim_feedforward,
            dropout=dropout,
            max_degree=max_degree,
            max_dist=max_dist,
            max_path_len=max_path_len,
        )
        self.edge_gate = EdgeGate(d_model, dim_feedforward // 2, dropout)
        self.threshold = nn.Parameter(torch.tensor(0.0))
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward, dropout, activation="gelu", batch_first=True
        )
        self.graph_transformer = nn.TransformerEncoder(
            layer, num_graph_layers, enable_nested_tensor=False
        )
        self.graph_norm = nn.LayerNorm(d_model)
        outputs = num_classes if task == "classification" else 1
        self.prediction_head = PredictionHead(d_model, dim_feedforward // 2, outputs)

    def _edges(self, sc: torch.Tensor) -> torch.Tensor:
        n = sc.shape[-1]
        upper = torch.triu(torch.ones(n, n, dtype=torch.bool, device=sc.device), 1)
        bi, u, v = torch.where((sc > 0) & upper)
        counts = torch.bincount(bi, minlength=sc.shape[0])
        if (counts == 0).any():
            empty = torch.nonzero(counts == 0).flatten().tolist()
            raise ValueError(
                f"subjects {empty} have no SC edge (after thresholding?): AFR-Net routes over edges"
            )
        return torch.stack([bi, u, v])

    def edge_energy(
        self, sc: torch.Tensor, fc: torch.Tensor, flat: torch.Tensor, g: torch.Tensor,
        node_mask: torch.Tensor | None,
    ) -> torch.Tensor:  # fmt: skip
        """The flow energy of each flat edge given its conductance (one batched solve)."""
        bi, u, v = flat
        if g.dtype not in (torch.float32, torch.float64):
            g = g.float()  # a half-precision model still inverts its Laplacians in float32
        check_solver_dtype(self.solver, g.dtype)
        weights = sc.new_zeros(sc.shape, dtype=g.dtype).index_put((bi, u, v), g)
        weights = weights + weights.transpose(-1, -2)
        energy = _dense_energy(
            weights, fc.to(g.dtype), sc, node_mask, self.delta, 1e-6, self.solver,
            self.allow_disconnected,
        )  # fmt: skip
        return self.energy_scale * energy[bi, u, v]

    def forward(
        self,
        sc: torch.Tensor,
        fc: torch.Tensor,
        *,
        features: GraphFeatures | None = None,
        node_mask: torch.Tensor | None = None,
        budget_lambda: float | None = None,
    ) -> AFROutput:
        if sc.dim() == 2:
            sc, fc = sc[None], fc[None]
            node_mask = None if node_mask is None else node_mask[None]
        _check_batch(sc, fc, self.num_nodes, node_mask, self.threshold.dtype)
        lam = self.lambda_cost if budget_lambda is None else budget_lambda
        check_mask_params(self.tau, lam)
        if features is None:
            features = batch_features(
                sc, node_mask, max_dist=self.max_dist, max_path_len=self.max_path_len
            ).to(sc.device)
        elif features.spd.dim() == 2:
            features = GraphFeatures.stack([features])
        if features.spd.shape != sc.shape:
            raise ValueError(
                f"features are for shape {tuple(features.spd.shape)}, sc is {tuple(sc.shape)}"
            )
        h = self.node_encoder(fc, features, node_mask)
        flat = self._edges(sc)
        bi, u, v = flat
        s_e, f_e = sc[bi, u, v], fc[bi, u, v]
        g = torch.exp(self.edge_gate(h[bi, u], h[bi, v], s_e, f_e))
        if self.use_routing:
            energy = self.edge_energy(sc, fc, flat, g, node_mask)
            mask = routing_mask(
                energy,
                s_e.to(energy.dtype),
                batch=bi,
                tau=self.tau,
                lambda_cost=lam,
                threshold=self.threshold,
            ).to(h.dtype)
        else:
            with torch.no_grad():
                energy = self.edge_energy(sc, fc, flat, g.detach(), node_mask)
            mask = torch.ones_like(energy, dtype=h.dtype)
        z = self.graph_transformer(h, mask=self.attention_bias(sc, flat, mask))
        logits = self.prediction_head(self.graph_norm(z), node_mask)
        if self.task == "regression":
            logits = logits.squeeze(-1)
        counts = torch.bincount(bi, minlength=sc.shape[0]).tolist()
        return AFROutput(
            logits=logits,
            energy=list(energy.split(counts)),
            mask=list(mask.split(counts)),
            conductance=list(g.split(counts)),
            edge_index=[e for e in flat[1:].split(counts, dim=1)],
            batch=bi,
            edges=flat[1:],
        )

    def attention_bias(
        self, sc: torch.Tensor, flat: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        """``log(m_e + 1e-9)`` on the edges (mirrored), 0 on the diagonal, -inf elsewhere, per head."""
        b, n = sc.shape[0], sc.shape[-1]
        bias = torch.full((b, n, n), float("-inf"), dtype=mask.dtype, device=sc.device)
        bias = bias.masked_fill(torch.eye(n, dtype=torch.bool, device=sc.device), 0.0)
        bi, u, v = flat
        values = torch.log(mask + ATTN_EPS)
        bias = bias.index_put((bi, u, v), values).index_put((bi, v, u), values)
        return bias.repeat_interleave(self.nhead, dim=0)

    @torch.no_grad()
    def routing(
        self,
        sc: torch.Tensor,
        fc: torch.Tensor,
        *,
        budget_lambda: float | None = None,
        **kwargs: Any,
    ) -> AFROutput:
        """Inference in eval mode without gradients; ``budget_lambda`` replaces λ_c."""
        was_training = self.training
        self.eval()
        try:
            return self(sc, fc, budget_lambda=budget_lambda, **kwargs)
        finally:
            self.train(was_training)

    def mean_mask(
        self,
        sc: torch.Tensor,
        fc: torch.Tensor,
        *,
        batch_size: int = 64,
        features: GraphFeatures | None = None,
        node_mask: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> torch.Tensor:
        """The routing mask averaged over subjects, as a dense symmetric ``[N, N]`` matrix,
        ``batch_size`` subjects at a time (per-subject ``features`` and ``node_mask`` follow)."""
        total = sc.new_zeros(self.num_nodes, self.num_nodes, dtype=torch.float32)
        if sc.dim() == 2:
            sc, fc = sc[None], fc[None]
            node_mask = None if node_mask is None else node_mask[None]
            features = None if features is None else GraphFeatures.stack([features])
        _check_batch_lengths(sc, fc=fc, node_mask=node_mask, features=features)
        for start in range(0, sc.shape[0], batch_size):
            rows = slice(start, start + batch_size)
            chunk = None if features is None else features.rows(rows)
            out = self.routing(
                sc[rows], fc[rows], features=chunk,
                node_mask=None if node_mask is None else node_mask[rows], **kwargs,
            )  # fmt: skip
            total += out.dense(torch.cat(out.mask).float(), self.num_nodes).sum(0)
        return total / sc.shape[0]

    def critical_pathways(
        self,
        sc: torch.Tensor,
        fc: torch.Tensor,
        top_k: int = 50,
        *,
        as_graph: bool = False,
        **kwargs: Any,
    ) -> Any:
        """The ``top_k`` edges by mean routing mask over the given subjects, as ``(u, v, m)``
        tuples (strongest first), or as a ``networkx.Graph`` with a ``mask`` edge attribute."""
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        mean = self.mean_mask(sc, fc, **kwargs)
        u, v = torch.triu_indices(self.num_nodes, self.num_nodes, 1)
        values = mean[u, v]
        order = torch.argsort(values, descending=True, stable=True)[:top_k]
        order = order[values[order] > 0]
        rows = [(int(u[i]), int(v[i]), float(values[i])) for i in order]
        if not as_graph:
            return rows
        import networkx as nx

        graph = nx.Graph()
        graph.add_nodes_from(range(self.num_nodes))
        graph.add_weighted_edges_from(rows, weight="mask")
        return graph


def _check_batch_lengths(sc: torch.Tensor, **others: Any) -> None:
    """Chunking slices every batched input by subject: a length that differs from ``sc``'s would
    be cut silently (extra subjects dropped, or a short chunk), so it is an error up front."""
    for name, value in others.items():
        tensor = value.spd if isinstance(value, GraphFeatures) else value
        if tensor is not None and tensor.shape[0] != sc.shape[0]:
            raise ValueError(
                f"{name} holds {tensor.shape[0]} subjects (shape {tuple(tensor.shape)}) but sc "
                f"holds {sc.shape[0]} (shape {tuple(sc.shape)}); give one entry per subject"
            )
