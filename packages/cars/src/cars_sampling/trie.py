"""The CARS trie: one node per visited prefix, holding the LM's next-token distribution p_u and θ_u.

Invariant (checked by :func:`invariant_error`): for every edge (u, a) with a child node,
``θ_u(a) = Z_{ua} = Σ_b p_{ua}(b) θ_{ua}(b)``, the share of the subtree's mass not yet known to be
invalid; ``θ_u(a) = 0`` for tokens known to be invalid at u, ``1`` for untouched edges. Sampling
token by token from ``∝ p_u ⊙ θ_u`` then gives ``Q(w) = P(w) 1[w ∉ W] / Z_root``.

Two node layouts hold the same numbers:

* :class:`DenseNode` (the official code's layout): θ as a full float64 vector, ``Z = Σ p θ``.
* :class:`SparseNode` (exact, O(#changed entries) memory): the allowed-token mask packed to bits
  (the "cone"), a dict of modified θ entries and the removed mass ``r = Σ_b p(b)(1 − θ(b))``, so
  ``Z = 1 − r`` is an O(1) update. When ``r ≥ 1/2`` the subtraction would cancel catastrophically
  (neural LMs give Z far below 1e-16), so Z is then summed directly over the live entries.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import torch

# Python-object overhead per node (dict of children, slots) counted in the memory figures.
_NODE_OVERHEAD = 200
_SPARSE_ENTRY = 16  # one modified θ entry: int key + float value (payload only)


def probs_from_logp(logp: torch.Tensor, lse: float) -> torch.Tensor:
    """Exact float64 probabilities from stored float32 log-probs and their log-sum-exp."""
    return torch.exp(logp.to(torch.float64) - lse)


def draw(weights: torch.Tensor | np.ndarray, u: float) -> int:
    """Inverse-CDF draw of an index ∝ ``weights`` (non-negative) with the uniform ``u`` in [0, 1).

    Returns -1 when all weights are zero. One uniform per draw, so two samplers fed the same
    stream make the same choices whenever their weights agree.
    """
    # numpy on a zero-copy view: torch's per-call overhead (cumsum, a tensor for the query,
    # searchsorted) was a third of the sampler's own cost per token.
    w = weights.numpy() if isinstance(weights, torch.Tensor) else weights
    cdf = w.cumsum()  # the methods, not np.cumsum/np.searchsorted: no dispatch wrapper per call
    total = float(cdf[-1])
    if not total > 0.0:
        return -1
    idx = int(cdf.searchsorted(u * total, side="right"))
    if idx >= w.size:  # u * total rounded up to the total: take the last positive entry
        idx = int(np.flatnonzero(w)[-1])
    return idx


class _Node:
    __slots__ = ("born", "children", "logp", "lp", "lse")

    def __init__(self, logp: torch.Tensor, born: int) -> None:
        self.logp = logp.contiguous()
        self.lp = self.logp.numpy()  # a view, for cheap scalar reads in the per-token loop
        self.lse = float(torch.logsumexp(logp.to(torch.float64), 0))
        self.children: dict[int, Node] = {}
        self.born = born

    def probs(self) -> torch.Tensor:
        return probs_from_logp(self.logp, self.lse)

    def prob(self, token: int) -> float:
        return math.exp(float(self.lp[token]) - self.lse)


class DenseNode(_Node):
    """θ stored as a full float64 vector (two V-length vectors per node)."""

    __slots__ = ("_theta_np", "theta")

    def __init__(self, logp: torch.Tensor, born: int) -> None:
        super().__init__(logp, born)
        self.theta = torch.ones(logp.numel(), dtype=torch.float64)
        self._theta_np = self.theta.numpy()

    def weights(self) -> torch.Tensor:
        return self.probs() * self.theta

    def z(self) -> float:
        return float(self.weights().sum())

    def get_theta(self, token: int) -> float:
        return float(self._theta_np[token])

    def set_theta(self, token: int, value: float) -> int:
        self._theta_np[token] = value
        return 0

    def apply_cone(self, allowed: torch.Tensor, probs: torch.Tensor | None = None) -> None:
        self.theta[~allowed] = 0.0

    def theta_vector(self) -> torch.Tensor:
        return self.theta.clone()

    def nbytes(self) -> int:
        return (
            self.logp.numel() * self.logp.element_size() + self.theta.numel() * 8 + _NODE_OVERHEAD
        )


class SparseNode(_Node):
    """θ stored as a packed allowed-mask, a dict of modified entries and the removed mass."""

    __slots__ = ("allowed", "mod", "removed")

    def __init__(self, logp: torch.Tensor, born: int) -> None:
        super().__init__(logp, born)
        self.allowed: np.ndarray | None = None  # packed bits; None = every token allowed
        self.mod: dict[int, float] = {}
        self.removed = 0.0

    def _is_allowed(self, token: int) -> bool:
        if self.allowed is None:
            return True
        return bool((self.allowed[token >> 3] >> (7 - (token & 7))) & 1)

    def _allowed_tensor(self) -> torch.Tensor:
        assert self.allowed is not None
        bits = np.unpackbits(self.allowed, count=self.logp.numel()).astype(bool)
        return torch.from_numpy(bits)

    def weights(self) -> torch.Tensor:
        w = self.probs()
        if self.allowed is not None:
            w[~self._allowed_tensor()] = 0.0
        if self.mod:
            idx = torch.tensor(list(self.mod), dtype=torch.long)
            w[idx] *= torch.tensor(list(self.mod.values()), dtype=torch.float64)
        return w

    def z(self) -> float:
        if self.removed < 0.5:
            return max(0.0, 1.0 - self.removed)
        return float(self.weights().sum())

    def get_theta(self, token: int) -> float:
        if not self._is_allowed(token):
            return 0.0
        return self.mod.get(token, 1.0)

    def set_theta(self, token: int, value: float) -> int:
        """Set one entry; returns how many new dict entries it took (for the memory count)."""
        old = self.get_theta(token)
        if value == old or not self._is_allowed(token):
            return 0
        self.removed += self.prob(token) * (old - value)
        fresh = token not in self.mod
        self.mod[token] = value
        return int(fresh)

    def apply_cone(self, allowed: torch.Tensor, probs: torch.Tensor | None = None) -> None:
        """Zero θ outside ``allowed``; ``probs`` (this node's ``p``) saves recomputing it."""
        p = self.probs() if probs is None else probs
        if self.allowed is None and not self.mod:  # the usual case: a cone on a fresh node
            bits = allowed.numpy()
            self.removed += float(p.numpy()[~bits].sum())
            self.allowed = np.packbits(bits)
            return
        banned = (~allowed).nonzero().flatten()
        theta_now = torch.ones_like(p)
        if self.allowed is not None:
            theta_now[~self._allowed_tensor()] = 0.0
        for tok, val in self.mod.items():
            theta_now[tok] = val
        self.removed += float((p[banned] * theta_now[banned]).sum())
        for tok in banned.tolist():
            self.mod.pop(tok, None)
        keep = allowed if self.allowed is None else allowed & self._allowed_tensor()
        self.allowed = np.packbits(keep.numpy())

    def theta_vector(self) -> torch.Tensor:
        theta = torch.ones(self.logp.numel(), dtype=torch.float64)
        if self.allowed is not None:
            theta[~self._allowed_tensor()] = 0.0
        for tok, val in self.mod.items():
            theta[tok] = val
        return theta

    def nbytes(self) -> int:
        mask = 0 if self.allowed is None else self.allowed.nbytes
        return (
            self.logp.numel() * self.logp.element_size()
            + mask
            + _SPARSE_ENTRY * len(self.mod)
            + _NODE_OVERHEAD
        )


Node = DenseNode | SparseNode


class Trie:
    """The prefix trie of one (prompt, constraint) run, dense or sparse, with a memory guard.

    Sampling weights of recently visited nodes are kept in a small LRU cache (``cache_bytes``, not
    counted in :attr:`nbytes`): the upper nodes are visited by every attempt, and recomputing
    ``p ⊙ θ`` there dominated the sampler's own cost.
    """

    def __init__(
        self, *, sparse: bool = True, max_bytes: int | None = None, cache_bytes: int = 32 << 20
    ) -> None:
        self.sparse = sparse
        self.max_bytes = max_bytes
        self.cache_bytes = cache_bytes
        # Bytes kept free for the θ entries one attempt may add (set by the sampler), so that the
        # limit holds after propagation too, not only when nodes are created.
        self.reserve = 0
        self.root: Node | None = None
        self.n_nodes = 0
        self._sparse_entries = 0
        self._base_bytes = 0
        # Arrays, not tensors: the per-token loop reads, sums and draws from them, and numpy's
        # per-call overhead is a fraction of torch's at these sizes.
        self._cache: OrderedDict[tuple[int, bool], tuple[Node, np.ndarray]] = OrderedDict()

    def weights_array(self, node: Node, theta: bool = True) -> np.ndarray:
        """``p ⊙ θ`` (``theta=True``) or ``p`` at ``node`` as a float64 array (cached; read only)."""
        key = (id(node), theta)
        hit = self._cache.get(key)
        if hit is not None and hit[0] is node:
            self._cache.move_to_end(key)
            return hit[1]
        w = (node.weights() if theta else node.probs()).numpy()
        self._cache[key] = (node, w)
        if len(self._cache) * 8 * w.size > self.cache_bytes:
            self._cache.popitem(last=False)
        return w

    def weights(self, node: Node, theta: bool = True) -> torch.Tensor:
        """:meth:`weights_array` as a tensor sharing its memory (do not modify it)."""
        return torch.from_numpy(self.weights_array(node, theta))

    def z(self, node: Node) -> float:
        """``Z_u = Σ p_u θ_u``: the sparse O(1) form when it is accurate, else a (cached) sum."""
        if isinstance(node, SparseNode) and node.removed < 0.5:
            return node.z()
        return float(self.weights_array(node).sum())

    def _uncache(self, node: Node) -> None:
        self._cache.pop((id(node), True), None)

    @property
    def entry_bytes(self) -> int:
        """Bytes one modified θ entry costs (0 for dense nodes, whose θ is preallocated)."""
        return _SPARSE_ENTRY if self.sparse else 0

    def check_room(self, size: int) -> None:
        """Raise :class:`TrieMemoryError` unless ``size`` more bytes (plus the reserve) fit."""
        if self.max_bytes is not None and self.nbytes + size + self.reserve > self.max_bytes:
            from cars_sampling.errors import TrieMemoryError

            raise TrieMemoryError(
                f"the trie would exceed max_trie_bytes={self.max_bytes} ({self.n_nodes} nodes, "
                f"{self.nbytes} bytes so far, {size} more for a new node, {self.reserve} kept for "
                "one attempt's θ updates); raise the limit, use sparse_trie=True, or lower "
                "max_new_tokens"
            )

    def new_node(self, logp: torch.Tensor, born: int) -> Node:
        """A detached node for ``logp``; raises :class:`TrieMemoryError` past ``max_bytes``.

        A sparse node's cone mask is counted when the node is made, so a later cone cannot
        overshoot the limit.
        """
        node: Node = SparseNode(logp, born) if self.sparse else DenseNode(logp, born)
        size = node.nbytes() + (self._mask_bytes(logp.numel()) if self.sparse else 0)
        self.check_room(size)
        self.n_nodes += 1
        self._base_bytes += size
        return node

    @staticmethod
    def _mask_bytes(vocab: int) -> int:
        return (vocab + 7) // 8

    def set_root(self, logp: torch.Tensor, born: int) -> Node:
        self.root = self.new_node(logp, born)
        return self.root

    def add_child(self, parent: Node, token: int, logp: torch.Tensor, born: int) -> Node:
        child = self.new_node(logp, born)
        parent.children[token] = child
        return child

    def apply_cone(self, node: Node, allowed: torch.Tensor) -> None:
        """Zero θ on the tokens the constraint disallows at ``node`` (CARS' cone)."""
        allowed = allowed.to("cpu", torch.bool)
        node.apply_cone(allowed, self.weights(node, theta=False))
        self._uncache(node)

    def set_theta(self, node: Node, token: int, value: float) -> None:
        self._sparse_entries += node.set_theta(token, value)
        hit = self._cache.get((id(node), True))
        if hit is not None and hit[0] is node:
            hit[1][token] = node.prob(token) * node.get_theta(token)

    def propagate(self, nodes: Sequence[Node], tokens: Sequence[int]) -> None:
        """Restore the invariant along a path, bottom-up: ``θ_{u_i}(a_i) = Z_{u_{i+1}}``."""
        for i in range(len(nodes) - 2, -1, -1):
            self.set_theta(nodes[i], tokens[i], self.z(nodes[i + 1]))

    @property
    def nbytes(self) -> int:
        """Payload bytes held: log-probs, θ (dense) or mask + modified entries (sparse), overhead."""
        return self._base_bytes + _SPARSE_ENTRY * self._sparse_entries

    def nodes(self) -> list[Node]:
        out: list[Node] = []
        stack = [self.root] if self.root is not None else []
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(node.children.values())
        return out


def invariant_error(trie: Trie) -> float:
    """Largest ``|θ_u(a) − Z_{ua}|`` over all edges with a child (0 for a consistent trie)."""
    worst = 0.0
    for node in trie.nodes():
        for token, child in node.children.items():
            worst = max(worst, abs(node.get_theta(token) - child.z()))
    return worst
