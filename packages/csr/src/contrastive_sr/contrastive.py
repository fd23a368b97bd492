"""The contrastive metric: a PSD matrix ``M = W Wᵀ`` whose distances match target differences.

Upstream ``solve_transformation_matrix``: on a subsample of ≤ m rows, with ``d_ij = φ_i − φ_j`` and
``D_ij = |r_i − r_j|``, solve over symmetric M

    min_M  Σ_{i,j} (d_ijᵀ M d_ij − D_ij)²  +  λ ||M||_F²

in closed form (ridge on the vectorised system), symmetrise, clip negative eigenvalues and return
``W = U Λ^{1/2}``. The sum runs over ordered pairs, as upstream's ``B`` (m² × k²) does; we build
its normal equations from moments (:func:`normal_equations`) without forming B.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data


def pair_system(Phi: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Differences ``d_ij`` (P × k) and targets ``|r_i − r_j|`` (P) over unordered pairs i < j."""
    i, j = np.triu_indices(Phi.shape[0], k=1)
    return Phi[i] - Phi[j], np.abs(r[i] - r[j])


def contrastive_objective(M: np.ndarray, Phi: np.ndarray, r: np.ndarray, reg: float) -> float:
    """``Σ_{i,j ordered} (d_ijᵀ M d_ij − |r_i − r_j|)² + reg ||M||_F²``."""
    d, D = pair_system(Phi, r)
    fit = np.einsum("pa,ab,pb->p", d, M, d) - D
    return float(2.0 * fit @ fit + reg * np.sum(M * M))


def normal_equations(
    Phi: np.ndarray, r: np.ndarray, targets: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``BᵀB`` (k² × k²) and ``Bᵀ vec(D)`` of the ordered-pair system, without forming B.

    With rows ``b_ij = vec(d_ij d_ijᵀ)`` B has m² rows; but differences do not change when Φ is
    centred, and for centred x the fourth moments of differences are
    ``Σ_ij d_a d_b d_c d_d = 2m S4_abcd + 2 (S2_ab S2_cd + S2_ac S2_bd + S2_ad S2_bc)``
    (S2, S4 the second and fourth moment sums), and ``Σ_ij D_ij d_ij d_ijᵀ = 2 Xᵀ diag(D 1) X −
    2 Xᵀ D X``: O(m k⁴ + m² k) instead of O(m² k⁴). ``targets`` (m × m, symmetric) replaces
    ``D = |r_i − r_j|`` when given.
    """
    m, k = Phi.shape
    X = Phi - Phi.mean(axis=0)
    Q = (X[:, :, None] * X[:, None, :]).reshape(m, k * k)
    S2 = X.T @ X
    pairs = np.einsum("ab,cd->abcd", S2, S2)
    A = 2.0 * m * (Q.T @ Q) + 2.0 * (
        pairs + pairs.transpose(0, 2, 1, 3) + pairs.transpose(0, 3, 2, 1)
    ).reshape(k * k, k * k)
    D = np.abs(r[:, None] - r[None, :]) if targets is None else targets
    rhs = 2.0 * (X.T * D.sum(axis=1)) @ X - 2.0 * X.T @ D @ X
    return A, rhs.reshape(k * k)


def solve_metric(
    Phi: np.ndarray, r: np.ndarray, reg: float, targets: np.ndarray | None = None
) -> np.ndarray:
    """The minimiser M (k × k) of :func:`contrastive_objective`, ``(BᵀB + λI)⁻¹ Bᵀ vec(D)``.

    The minimiser is symmetric (every row of B is a symmetric matrix); we symmetrise against
    rounding, as upstream does.
    """
    k = Phi.shape[1]
    A, rhs = normal_equations(Phi, r, targets)
    A[np.diag_indices_from(A)] += reg
    try:
        u = np.linalg.solve(A, rhs)
    except np.linalg.LinAlgError:  # singular only when reg == 0 and the pairs are degenerate
        u = np.linalg.lstsq(A, rhs, rcond=None)[0]
    M = u.reshape(k, k)
    return (M + M.T) / 2.0


def psd_factor(M: np.ndarray, n_components: int | None = None) -> np.ndarray:
    """``W = U_p Λ_p^{1/2}`` from the top-p eigenpairs of sym(M), negative eigenvalues set to 0."""
    vals, vecs = np.linalg.eigh((M + M.T) / 2.0)
    order = np.argsort(vals)[::-1][: n_components or M.shape[0]]
    return vecs[:, order] * np.sqrt(np.clip(vals[order], 0.0, None))


def solve_transformation_matrix(
    Phi: np.ndarray,
    r: np.ndarray,
    reg: float,
    subsample: int,
    rng: np.random.Generator,
    n_components: int | None = None,
) -> np.ndarray:
    """W (k × p) from a random subsample of ≤ ``subsample`` rows; ``I`` when the solve fails."""
    n, k = Phi.shape
    if n > subsample:
        rows = rng.choice(n, size=subsample, replace=False)
        Phi, r = Phi[rows], r[rows]
    M = solve_metric(Phi, r, reg)
    if not np.all(np.isfinite(M)):
        return np.eye(k)[:, : n_components or k]
    return psd_factor(M, n_components)


class ContrastiveMetric(TransformerMixin, BaseEstimator):
    """Learn a linear map W so that distances in ``X W`` match target differences ``|y_i − y_j|``.

    Usable on raw features in a ``Pipeline`` (e.g. before a k-NN regressor).

    Parameters
    ----------
    reg : float, default 0.1
        Ridge penalty λ on ``||M||_F²`` (CSR's ``contrastive_l2_regularization``).
    subsample : int, default 100
        Rows drawn (without replacement) for the pairwise system; the cost is O(subsample² k²).
    n_components : int or None, default None
        Columns of W kept (top eigenpairs); all by default.
    random_state : int, RandomState or None
        Seeds the subsample.

    Attributes
    ----------
    W_ : ndarray (n_features, n_components)
    metric_ : ndarray (n_features, n_features), the PSD ``W Wᵀ``.
    """

    def __init__(
        self,
        reg: float = 0.1,
        subsample: int = 100,
        n_components: int | None = None,
        random_state: Any = None,
    ) -> None:
        self.reg = reg
        self.subsample = subsample
        self.n_components = n_components
        self.random_state = random_state

    def fit(self, X: Any, y: Any) -> ContrastiveMetric:
        if not (isinstance(self.reg, (int, float)) and self.reg >= 0):
            raise ValueError(f"reg must be a float >= 0, got {self.reg!r}")
        if not (isinstance(self.subsample, (int, np.integer)) and self.subsample >= 2):
            raise ValueError(f"subsample must be an integer >= 2, got {self.subsample!r}")
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        if self.n_components is not None and not 1 <= self.n_components <= X.shape[1]:
            raise ValueError(
                f"n_components must be in [1, n_features={X.shape[1]}], got {self.n_components!r}"
            )
        from sklearn.utils import check_random_state

        seed = check_random_state(self.random_state).randint(2**31 - 1)
        self.W_ = solve_transformation_matrix(
            X,
            y,
            float(self.reg),
            int(self.subsample),
            np.random.default_rng(seed),
            self.n_components,
        )
        self.metric_ = self.W_ @ self.W_.T
        return self

    def transform(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "W_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return X @ self.W_
