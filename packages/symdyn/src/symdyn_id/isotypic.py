"""Isotypic decomposition of an orthogonal representation and the identifiability length T*.

R^d = (+)_i W_i, W_i ~ V_i (x) R^{m_i}, V_i a real irrep of dimension d_i whose endomorphism algebra is
R, C or H (real dimension e_i); the commutant is (+)_i M_{m_i}(D_i), of dimension sum_i e_i m_i^2.
Found numerically from two projections onto the commutant (no character table needed):

1. a random *central* symmetric element Z = P(a + a^T), a a random combination of group elements
   (Z lies in C and in the span of rho(G), i.e. in the centre of C): it acts as a distinct scalar
   on each W_i, so its eigenspaces are the W_i;
2. a random symmetric S in C restricted to W_i is a random Hermitian m_i x m_i matrix over D_i: it
   has m_i distinct eigenvalues, each of multiplicity d_i;
3. on one such d_i-dimensional eigenspace E the commutant restricts to D_i itself, so e_i is the
   rank of a few random compressions Q_E^T P(Q_E X Q_E^T) Q_E.

Identifiability [derived and measured]: in block i the state is an m_i x (d_i / e_i) matrix over D_i and
each transition adds d_i / e_i generic D_i-columns, so a generic single trajectory identifies A from
T >= T* = max_i ceil(e_i m_i / d_i) transitions (T = d without symmetry).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

Projector = Callable[[np.ndarray], np.ndarray]


@dataclasses.dataclass(frozen=True)
class IsotypicBlock:
    """One isotypic component: irrep dimension, multiplicity, division-algebra dimension, basis."""

    dim: int  # d_i
    multiplicity: int  # m_i
    division_dim: int  # e_i in {1, 2, 4}: R, C or H
    basis: np.ndarray  # (d, d_i m_i), orthonormal columns spanning W_i

    @property
    def commutant_dim(self) -> int:
        return self.division_dim * self.multiplicity**2

    @property
    def min_length(self) -> int:
        """ceil(e_i m_i / d_i): transitions this block needs."""
        return -(-self.division_dim * self.multiplicity // self.dim)


def cluster_eigenvalues(values: np.ndarray, tol: float) -> list[np.ndarray]:
    """Indices of sorted ``values`` grouped where consecutive gaps are at most ``tol``."""
    order = np.argsort(values)
    gaps = np.diff(values[order]) > tol
    cuts = np.flatnonzero(gaps) + 1
    return [idx for idx in np.split(order, cuts)]


def isotypic_decomposition(
    project: Projector,
    group_combination: np.ndarray,
    p: int,
    rng: np.random.Generator,
    tol: float = 1e-7,
) -> list[IsotypicBlock]:
    """The blocks (see the module docstring). ``group_combination`` is a random combination of
    group elements ``sum_j c_j rho(g_j)``; ``p`` the commutant dimension, checked against
    ``sum e_i m_i^2``. Raises RuntimeError when the numerical split is inconsistent."""
    d = group_combination.shape[0]
    central = project(group_combination + group_combination.T)
    central = 0.5 * (central + central.T)
    vals, vecs = np.linalg.eigh(central)
    scale = max(1.0, float(np.abs(vals).max()))
    sym = rng.standard_normal((d, d))
    s_mat = project(sym + sym.T)
    blocks = []
    for idx in cluster_eigenvalues(vals, tol * scale):
        q = vecs[:, idx]
        s_i = q.T @ s_mat @ q
        s_i = 0.5 * (s_i + s_i.T)
        w, u = np.linalg.eigh(s_i)
        groups = cluster_eigenvalues(w, tol * max(1.0, float(np.abs(w).max())))
        sizes = {len(g) for g in groups}
        if len(sizes) != 1:
            raise RuntimeError(f"inconsistent multiplicities {sorted(sizes)} in an isotypic block")
        m_i, d_i = len(groups), sizes.pop()
        e_i = _division_dim(project, q @ u[:, groups[0]], rng, tol)
        blocks.append(IsotypicBlock(dim=d_i, multiplicity=m_i, division_dim=e_i, basis=q))
    total = sum(b.commutant_dim for b in blocks)
    if total != p:
        raise RuntimeError(f"isotypic split gives sum e_i m_i^2 = {total}, commutant has {p}")
    return blocks


def _division_dim(project: Projector, q_e: np.ndarray, rng: np.random.Generator, tol: float) -> int:
    # The commutant compressed to one irreducible copy E is the division algebra D_i (dim 1, 2, 4).
    n = q_e.shape[1]
    samples = []
    for _ in range(5):
        x = rng.standard_normal((n, n))
        samples.append((q_e.T @ project(q_e @ x @ q_e.T) @ q_e).ravel())
    sv = np.linalg.svd(np.stack(samples), compute_uv=False)
    rank = int((sv > np.sqrt(tol) * sv[0]).sum())
    if rank not in (1, 2, 4):
        raise RuntimeError(f"division algebra of real dimension {rank}: not R, C or H")
    return rank


def min_trajectory_length(blocks: list[IsotypicBlock]) -> int:
    """T*(rho) = max_i ceil(e_i m_i / d_i)."""
    return max(b.min_length for b in blocks)
