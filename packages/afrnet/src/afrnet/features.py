"""Graphormer's structural features without DGL: hop distances, shortest-path edge weights, degrees.

DGL's ``shortest_dist(g, return_paths=True)`` is replaced by
``scipy.sparse.csgraph.shortest_path(unweighted=True, return_predecessors=True)``; each path is read
from the breadth-first tree rooted at its target, so edge ``l`` of the path ``i -> j`` is the
``l``-th hop from ``i``. Where several shortest paths tie, the one chosen may differ from DGL's.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import OrderedDict

import numpy as np
import torch
from numpy.typing import ArrayLike, NDArray

from afrnet.preprocess import check_sc

_CACHE: OrderedDict[tuple[str, int, int], GraphFeatures] = OrderedDict()
_CACHE_SIZE = 4096


@dataclasses.dataclass(frozen=True)
class GraphFeatures:
    """Per-subject (or stacked ``[B, ...]``) Graphormer inputs.

    ``spd``: hop distance, ``-1`` where unreachable, int64 ``[N, N]``; ``paths``: ``S_e + 1`` of the
    ``l``-th edge on the shortest path (``0`` past its end), float32 ``[N, N, max_path_len]``;
    ``degree``: number of ``S > 0`` entries per row, int64 ``[N]`` (DGL's in-degree of the graph
    built from ``S > 0``, diagonal included).
    """

    spd: torch.Tensor
    paths: torch.Tensor
    degree: torch.Tensor

    @property
    def num_nodes(self) -> int:
        return int(self.spd.shape[-1])

    def to(self, device: torch.device | str) -> GraphFeatures:
        return GraphFeatures(self.spd.to(device), self.paths.to(device), self.degree.to(device))

    def rows(self, index: slice) -> GraphFeatures:
        """The subjects ``index`` of batched (``[B, N, N]``) features."""
        return GraphFeatures(self.spd[index], self.paths[index], self.degree[index])

    @staticmethod
    def stack(items: list[GraphFeatures]) -> GraphFeatures:
        """Stack per-subject features of equal N into a batch."""
        sizes = {f.num_nodes for f in items}
        if len(sizes) != 1:
            raise ValueError(f"cannot stack features of different N {sorted(sizes)}; pad first")
        return GraphFeatures(
            torch.stack([f.spd for f in items]),
            torch.stack([f.paths for f in items]),
            torch.stack([f.degree for f in items]),
        )

    def padded(self, num_nodes: int) -> GraphFeatures:
        """One subject's features padded to ``num_nodes`` (padding unreachable, zero paths)."""
        n = self.num_nodes
        if num_nodes < n:
            raise ValueError(f"cannot pad N = {n} features down to {num_nodes}")
        spd = torch.full((num_nodes, num_nodes), -1, dtype=self.spd.dtype)
        spd[:n, :n] = self.spd
        paths = torch.zeros(num_nodes, num_nodes, self.paths.shape[-1], dtype=self.paths.dtype)
        paths[:n, :n] = self.paths
        degree = torch.zeros(num_nodes, dtype=self.degree.dtype)
        degree[:n] = self.degree
        return GraphFeatures(spd, paths, degree)


def _hop_paths(
    sc: NDArray[np.float64], max_dist: int, max_path_len: int
) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    n = sc.shape[0]
    adj = csr_matrix((sc > 0) & ~np.eye(n, dtype=bool))
    dist, pred = shortest_path(adj, directed=False, unweighted=True, return_predecessors=True)
    spd = np.where(np.isfinite(dist), dist, -1).astype(np.int64)
    spd = np.where(spd > max_dist, max_dist, spd)
    paths = np.zeros((n, n, max_path_len), dtype=np.float32)
    # pred[j, k] is k's parent in the BFS tree rooted at j, i.e. the next hop from k towards j.
    cur = np.broadcast_to(np.arange(n)[:, None], (n, n)).copy()
    target = np.broadcast_to(np.arange(n)[None, :], (n, n))
    hops = np.where(np.isfinite(dist), dist, 0).astype(np.int64)
    for step in range(max_path_len):
        live = hops > step
        nxt = np.where(live, pred[target, cur], cur)
        paths[..., step] = np.where(live, sc[cur, nxt] + 1.0, 0.0)
        cur = nxt
    return spd, paths


def graph_features(sc: ArrayLike, *, max_dist: int = 510, max_path_len: int = 5) -> GraphFeatures:
    """Hop distances, path edge features and degrees of one SC matrix ``[N, N]`` (cached).

    The cache is keyed on the bytes of ``sc`` and the two limits, so repeated epochs over the
    same subjects pay once.
    """
    arr = np.ascontiguousarray(np.asarray(sc, dtype=np.float64))
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise ValueError(f"graph_features takes one [N, N] SC matrix, got shape {arr.shape}")
    check_sc(arr)  # finite, non-negative, symmetric: the hop graph is undirected
    if max_path_len < 1 or max_dist < 1:
        raise ValueError(f"max_path_len and max_dist must be >= 1, got {max_path_len}, {max_dist}")
    key = (
        hashlib.sha1(arr.tobytes() + str(arr.shape).encode()).hexdigest(),
        max_dist,
        max_path_len,
    )
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return hit
    spd, paths = _hop_paths(arr, max_dist, max_path_len)
    degree = (arr > 0).sum(axis=1).astype(np.int64)
    out = GraphFeatures(torch.from_numpy(spd), torch.from_numpy(paths), torch.from_numpy(degree))
    _CACHE[key] = out
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return out


def batch_features(
    sc: torch.Tensor | NDArray[np.float64],
    node_mask: torch.Tensor | None = None,
    *,
    max_dist: int = 510,
    max_path_len: int = 5,
) -> GraphFeatures:
    """:func:`graph_features` of each subject of a ``[B, N, N]`` batch, padded subjects trimmed
    to their ``node_mask`` first."""
    arr = sc.detach().cpu().double().numpy() if isinstance(sc, torch.Tensor) else np.asarray(sc)
    n = arr.shape[-1]
    items = []
    for b in range(arr.shape[0]):
        size = n if node_mask is None else int(node_mask[b].sum())
        feats = graph_features(arr[b, :size, :size], max_dist=max_dist, max_path_len=max_path_len)
        items.append(feats.padded(n) if size < n else feats)
    return GraphFeatures.stack(items)
