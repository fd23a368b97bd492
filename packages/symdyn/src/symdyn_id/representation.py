"""Finite group actions on R^d: :class:`Representation` and its library constructors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from .commutant import Commutant
from .fourier import GridShape
from .groups import (
    GroupTooLarge,
    as_orthogonal,
    as_permutation,
    enumerate_matrices,
    enumerate_permutations,
    permutation_matrix,
    random_word_matrices,
)
from .isotypic import IsotypicBlock, isotypic_decomposition, min_trajectory_length
from .reynolds import (
    WalkInfo,
    matrix_conjugations,
    permutation_conjugations,
    reynolds_walk,
)

ReynoldsMethod = Literal["auto", "basis", "enumerate", "walk"]
# Matrix actions: the dense commutant basis costs O(d^6); past this size Reynolds uses the group.
DENSE_BASIS_MAX_D = 48
MAX_ENUMERATE = 5000


class Representation:
    """An orthogonal action rho of a finite group on R^d, held by its generators.

    Build one from permutations of ``range(d)`` (``rho(g) e_i = e_{perm[i]}``), a ``sympy``
    ``PermutationGroup``, orthogonal matrices, a graph's automorphisms, or a library constructor
    (:meth:`cyclic`, :meth:`dihedral`, :meth:`symmetric`, :meth:`torus`, :meth:`block`,
    :meth:`product`). Everything expensive (commutant basis, isotypic decomposition) is computed
    once, on first use.
    """

    def __init__(
        self,
        d: int,
        *,
        permutations: Sequence[np.ndarray] | None = None,
        matrices: Sequence[np.ndarray] | None = None,
        name: str | None = None,
        grid: GridShape | None = None,
    ) -> None:
        if (permutations is None) == (matrices is None):
            raise ValueError("give exactly one of permutations= or matrices=")
        self.d = int(d)
        self.permutations = None if permutations is None else [np.asarray(p) for p in permutations]
        self.matrices = None if matrices is None else [np.asarray(m) for m in matrices]
        self.name = name or f"G<{self.n_generators} generators on R^{d}>"
        self.grid = grid
        self._commutant: Commutant | None = None
        self._blocks: list[IsotypicBlock] | None = None

    # -- constructors ---------------------------------------------------------------------------
    @classmethod
    def from_permutations(
        cls, generators: Any, d: int | None = None, name: str | None = None
    ) -> Representation:
        """From permutations of ``range(d)``, or a ``sympy.combinatorics`` ``PermutationGroup``."""
        if hasattr(generators, "generators") and hasattr(generators, "degree"):
            d = int(generators.degree) if d is None else d
            generators = list(generators.generators)
        generators = list(generators)
        if d is None:
            if not generators:
                raise ValueError("d is needed when there are no generators")
            d = len(getattr(generators[0], "array_form", generators[0]))
        if not isinstance(d, (int, np.integer)) or d < 1:
            raise ValueError(f"d must be a positive integer, got {d!r}")
        perms = [as_permutation(g, int(d), i) for i, g in enumerate(generators)]
        perms = [p for p in perms if np.any(p != np.arange(d))]  # identities generate nothing
        return cls(int(d), permutations=perms, name=name)

    @classmethod
    def from_matrices(cls, generators: Sequence[Any], name: str | None = None) -> Representation:
        """From orthogonal ``d x d`` matrices (checked to 1e-8)."""
        generators = list(generators)
        if not generators:
            raise ValueError("from_matrices needs at least one generator (use trivial(d))")
        first = as_orthogonal(generators[0], None, 0)
        mats = [first] + [
            as_orthogonal(g, first.shape[0], i) for i, g in enumerate(generators) if i
        ]
        return cls(first.shape[0], matrices=mats, name=name)

    @classmethod
    def from_graph(
        cls, graph: Any, name: str | None = None, max_automorphisms: int = 10_000
    ) -> Representation:
        """The automorphism group of a ``networkx`` graph acting on its nodes (in ``graph.nodes``
        order). Uses ``pynauty``'s generators when it is installed, else enumerates the
        automorphisms with networkx (at most ``max_automorphisms``)."""
        nodes = list(graph.nodes)
        index = {v: i for i, v in enumerate(nodes)}
        d = len(nodes)
        try:
            import pynauty
        except ImportError:
            pynauty = None
        if pynauty is not None:
            adjacency = {index[u]: [index[v] for v in graph.neighbors(u)] for u in nodes}
            g = pynauty.Graph(d, directed=graph.is_directed(), adjacency_dict=adjacency)
            gens = [list(map(int, p)) for p in pynauty.autgrp(g)[0]]
        else:
            from networkx.algorithms.isomorphism import GraphMatcher

            gens = []
            for k, mapping in enumerate(GraphMatcher(graph, graph).isomorphisms_iter()):
                if k >= max_automorphisms:
                    raise ValueError(
                        f"the graph has more than {max_automorphisms} automorphisms: install "
                        "pynauty for its generators, or raise max_automorphisms"
                    )
                gens.append([index[mapping[v]] for v in nodes])
        return cls.from_permutations(gens, d, name=name or f"Aut(graph on {d} nodes)")

    @classmethod
    def trivial(cls, d: int) -> Representation:
        return cls(d, permutations=[], name=f"trivial({d})")

    @classmethod
    def cyclic(cls, n: int) -> Representation:
        """C_n shifting n sites: ``i -> i + 1 mod n`` (circulant commutant, p = n)."""
        _check_size(n, "n")
        shift = (np.arange(n) + 1) % n
        return cls(n, permutations=[shift] if n > 1 else [], name=f"C{n}", grid=GridShape((n,)))

    @classmethod
    def dihedral(cls, n: int) -> Representation:
        """D_n on the n-cycle: shift and reflection ``i -> -i mod n`` (p = n // 2 + 1)."""
        _check_size(n, "n")
        shift = (np.arange(n) + 1) % n
        flip = (-np.arange(n)) % n
        gens = [g for g in (shift, flip) if np.any(g != np.arange(n))]
        return cls(n, permutations=gens, name=f"D{n}")

    @classmethod
    def symmetric(cls, n: int) -> Representation:
        """S_n permuting n sites (mean field: p = 2, A = a I + b 11^T)."""
        _check_size(n, "n")
        gens = []
        if n > 1:
            gens.append(np.r_[1, 0, np.arange(2, n)])
        if n > 2:
            gens.append((np.arange(n) + 1) % n)
        return cls(n, permutations=gens, name=f"S{n}")

    @classmethod
    def torus(cls, a: int, b: int) -> Representation:
        """C_a x C_b shifting an ``a x b`` periodic grid (row-major sites; BCCB commutant)."""
        rep = cls.product(cls.cyclic(a), cls.cyclic(b))
        rep.name = f"C{a}xC{b}"
        return rep

    @classmethod
    def product(cls, first: Representation, second: Representation) -> Representation:
        """G x H acting on R^a (x) R^b (index ``i * b + j``) as ``rho(g) (x) sigma(h)``."""
        a, b = first.d, second.d
        name = f"{first.name}x{second.name}"
        grid = None
        g1, g2 = first.grid, second.grid
        if g1 is not None and g2 is not None and g1.relabel is None and g2.relabel is None:
            # the product is again a plain grid when the first factor has one channel
            grid = GridShape(g1.shape + g2.shape, g2.channels) if g1.channels == 1 else None
        if first.is_permutation and second.is_permutation:
            assert first.permutations is not None and second.permutations is not None
            ia, ib = np.arange(a), np.arange(b)
            gens = [(p[:, None] * b + ib[None, :]).ravel() for p in first.permutations]
            gens += [(ia[:, None] * b + q[None, :]).ravel() for q in second.permutations]
            return cls(a * b, permutations=gens, name=name, grid=grid)
        mats = [np.kron(m, np.eye(b)) for m in first.generator_matrices()]
        mats += [np.kron(np.eye(a), m) for m in second.generator_matrices()]
        return cls(a * b, matrices=mats, name=name, grid=grid)

    @classmethod
    def block(cls, rep: Representation, k: int) -> Representation:
        """``rep`` acting on R^d (x) R^k as ``rho(g) (x) I_k`` (index ``site * k + channel``)."""
        _check_size(k, "k")
        grid = None
        if rep.grid is not None and rep.grid.relabel is None:
            grid = GridShape(rep.grid.shape, rep.grid.channels * k)
        name = f"block({rep.name},{k})"
        if rep.is_permutation:
            assert rep.permutations is not None
            ch = np.arange(k)
            gens = [(p[:, None] * k + ch[None, :]).ravel() for p in rep.permutations]
            return cls(rep.d * k, permutations=gens, name=name, grid=grid)
        mats = [np.kron(m, np.eye(k)) for m in rep.generator_matrices()]
        return cls(rep.d * k, matrices=mats, name=name, grid=grid)

    def conjugate(self, perm: Sequence[int], name: str | None = None) -> Representation:
        """The same group with sites relabelled by ``perm`` (``sigma rho(g) sigma^-1``)."""
        sigma = as_permutation(perm, self.d)
        sig = permutation_matrix(sigma)
        label = name or f"{self.name}^sigma"
        grid = None if self.grid is None else self.grid.relabelled(sigma)
        if self.is_permutation:
            assert self.permutations is not None
            inv = np.empty_like(sigma)
            inv[sigma] = np.arange(self.d)
            gens = [sigma[p[inv]] for p in self.permutations]
            return Representation(self.d, permutations=gens, name=label, grid=grid)
        mats = [sig @ m @ sig.T for m in self.generator_matrices()]
        return Representation(self.d, matrices=mats, name=label, grid=grid)

    # -- the group -----------------------------------------------------------------------------
    @property
    def is_permutation(self) -> bool:
        return self.permutations is not None

    @property
    def n_generators(self) -> int:
        gens = self.permutations if self.permutations is not None else self.matrices
        return len(gens or [])

    def generator_matrices(self) -> list[np.ndarray]:
        """The generators as ``d x d`` orthogonal matrices."""
        if self.permutations is not None:
            return [permutation_matrix(p) for p in self.permutations]
        assert self.matrices is not None
        return [m.copy() for m in self.matrices]

    def elements(self, max_order: int = MAX_ENUMERATE) -> np.ndarray:
        """Every group element as a ``(|G|, d, d)`` matrix stack (GroupTooLarge past max_order)."""
        if self.permutations is not None:
            perms = enumerate_permutations(self.permutations, self.d, max_order)
            return np.stack([permutation_matrix(p) for p in perms])
        assert self.matrices is not None
        return enumerate_matrices(self.matrices, self.d, max_order)

    def order(self, max_order: int = MAX_ENUMERATE) -> int:
        """|G| by enumeration (GroupTooLarge past ``max_order``)."""
        if self.permutations is not None:
            return len(enumerate_permutations(self.permutations, self.d, max_order))
        return len(self.elements(max_order))

    # -- commutant and Reynolds ----------------------------------------------------------------
    def commutant(self) -> Commutant:
        """The commutant C(rho) (orbital basis for permutations, null space otherwise)."""
        if self._commutant is None:
            if self.permutations is not None:
                self._commutant = Commutant.orbital(self.permutations, self.d)
            else:
                assert self.matrices is not None
                self._commutant = Commutant.dense(self.matrices, self.d)
        return self._commutant

    @property
    def commutant_dim(self) -> int:
        """p = dim C(rho) = sum_i e_i m_i^2."""
        return self.commutant().dim

    def commutant_basis(self) -> np.ndarray:
        """A basis ``(p, d, d)`` of C(rho): orbit indicators (permutations) or orthonormal."""
        return self.commutant().matrices()

    def reynolds(
        self,
        mat: np.ndarray,
        method: ReynoldsMethod = "auto",
        tol: float = 1e-10,
        max_iter: int | None = None,
    ) -> np.ndarray:
        """P(M) = |G|^-1 sum_g rho(g) M rho(g)^T, the projection of M onto C(rho).

        ``"basis"``: through the commutant basis (exact; orbit averages for permutations);
        ``"enumerate"``: the average over the enumerated group (exact, small groups);
        ``"walk"``: the lazy Cayley-graph walk to ``tol`` (see :meth:`reynolds_walk`).
        ``"auto"`` picks ``"basis"`` for permutations and small matrix actions, else
        ``"enumerate"`` when |G| <= 5000, else ``"walk"``.
        """
        mat = self._check_square(mat)
        if method == "auto":
            method = self._auto_reynolds()
        if method == "basis":
            return self.commutant().project(mat)
        if method == "enumerate":
            elems = self.elements()
            return np.einsum("gij,jk,glk->il", elems, mat, elems) / elems.shape[0]
        if method == "walk":
            return self.reynolds_walk(mat, tol=tol, max_iter=max_iter)[0]
        raise ValueError(f"method must be auto, basis, enumerate or walk, got {method!r}")

    def reynolds_walk(
        self, mat: np.ndarray, tol: float = 1e-10, max_iter: int | None = None
    ) -> tuple[np.ndarray, WalkInfo]:
        """The lazy random-walk approximation of P(M), with its steps and observed contraction."""
        mat = self._check_square(mat)
        if self.permutations is not None:
            conj = permutation_conjugations(self.permutations)
        else:
            assert self.matrices is not None
            conj = matrix_conjugations(self.matrices)
        return reynolds_walk(mat, conj, tol=tol, max_iter=max_iter)

    def _auto_reynolds(self) -> ReynoldsMethod:
        if self.is_permutation or self.d <= DENSE_BASIS_MAX_D or self._commutant is not None:
            return "basis"
        try:
            self.order(MAX_ENUMERATE)
        except GroupTooLarge:
            return "walk"
        return "enumerate"

    def _check_square(self, mat: np.ndarray) -> np.ndarray:
        arr = np.asarray(mat, dtype=np.float64)
        if arr.shape != (self.d, self.d):
            raise ValueError(f"matrix must have shape ({self.d}, {self.d}), got {arr.shape}")
        return arr

    # -- isotypic structure --------------------------------------------------------------------
    def isotypic_decomposition(self, seed: int = 0) -> list[IsotypicBlock]:
        """The isotypic blocks (d_i, m_i, e_i, basis); see :mod:`symdyn_id.isotypic`."""
        if self._blocks is None:
            rng = np.random.default_rng(seed)
            error: RuntimeError | None = None
            for attempt in range(3):
                combo = self._random_group_combination(rng, 64 * (attempt + 1))
                try:
                    self._blocks = isotypic_decomposition(
                        self.reynolds, combo, self.commutant_dim, rng
                    )
                    break
                except RuntimeError as err:  # an unlucky random split: retry with a longer walk
                    error = err
            else:
                raise RuntimeError(f"isotypic decomposition of {self.name} failed: {error}")
        return self._blocks

    def min_trajectory_length(self) -> int:
        """T*(rho) = max_i ceil(e_i m_i / d_i): transitions that identify a generic equivariant A."""
        if self.grid is not None:
            # abelian, regular on the sites: every irrep has e_i = d_i and m_i = channels
            return self.grid.channels
        return min_trajectory_length(self.isotypic_decomposition())

    def _random_group_combination(self, rng: np.random.Generator, length: int) -> np.ndarray:
        # sum_t c_t rho(w_t) along a lazy walk w_t, plus the generators themselves
        out = np.zeros((self.d, self.d))
        gens = self.generator_matrices()
        for g in gens:
            out += rng.standard_normal() * g
        for w in random_word_matrices(gens, self.d, length + 8 * len(gens), rng):
            out += rng.standard_normal() * w
        return out

    def __repr__(self) -> str:
        kind = "permutations" if self.is_permutation else "matrices"
        return f"Representation({self.name!r}, d={self.d}, {self.n_generators} {kind})"


def _check_size(n: Any, what: str) -> None:
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"{what} must be a positive integer, got {n!r}")
