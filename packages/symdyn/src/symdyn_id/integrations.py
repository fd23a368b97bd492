"""Peers: commutant constraints for pysindy's ``ConstrainedSR3``; PyDMD's DMD and PiDMD as baselines.

pysindy and pydmd are imported lazily (the ``peers`` extra).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .representation import Representation


def commutant_constraints(rep: Representation) -> tuple[np.ndarray, np.ndarray]:
    """``(constraint_lhs, constraint_rhs)`` with ``lhs @ A.ravel() = rhs`` iff A in C(rho).

    For pysindy's ``ConstrainedSR3(..., constraint_order="target", equality_constraints=True)``
    with ``PolynomialLibrary(degree=1, include_bias=False)``, whose coefficient matrix is A itself
    (``(n_targets, n_features) = (d, d)``, flattened row-major). ``d^2 - p`` rows.
    """
    lhs = rep.commutant().constraints()
    return lhs, np.zeros(lhs.shape[0])


def constrained_sr3(rep: Representation, **kwargs: Any) -> Any:
    """A pysindy ``ConstrainedSR3`` restricted to the commutant of ``rep`` (needs cvxpy installed:
    ``pip install "pysindy[cvxpy]"``). ``kwargs`` go to ``ConstrainedSR3``; without
    ``reg_weight_lam`` it is 0 (plain least squares on the commutant)."""
    try:
        from pysindy.optimizers import ConstrainedSR3
    except ImportError as err:  # pysindy hides ConstrainedSR3 when cvxpy is missing
        raise ImportError(
            "pysindy's ConstrainedSR3 needs pysindy and cvxpy: pip install 'pysindy[cvxpy]'"
        ) from err
    lhs, rhs = commutant_constraints(rep)
    kwargs.setdefault("reg_weight_lam", 0.0)
    return ConstrainedSR3(
        constraint_lhs=lhs,
        constraint_rhs=rhs,
        constraint_order="target",
        equality_constraints=True,
        **kwargs,
    )


def least_squares_dmd(trajectory: np.ndarray) -> np.ndarray:
    """Plain least squares / exact DMD without truncation: ``A = Y X^+`` (minimum norm)."""
    states, targets = trajectory[:-1], trajectory[1:]
    return np.linalg.lstsq(states, targets, rcond=None)[0].T


def pydmd_matrix(trajectory: np.ndarray, svd_rank: int = -1) -> np.ndarray:
    """``pydmd.DMD(svd_rank).fit`` on the ``(T+1, d)`` trajectory; A = Phi diag(lambda) Phi^+."""
    from pydmd import DMD

    dmd = DMD(svd_rank=svd_rank).fit(trajectory.T)
    mat = (dmd.modes * dmd.eigs) @ np.linalg.pinv(dmd.modes)
    return np.real_if_close(mat, tol=1e6).real


def pidmd_matrix(trajectory: np.ndarray, manifold: str, manifold_opt: Any = None) -> np.ndarray:
    """``pydmd.PiDMD(manifold, compute_A=True)`` on the ``(T+1, d)`` trajectory.

    PiDMD keeps at most rank(X) <= T eigenvalues, so it needs T >= d even when the structure would
    identify A sooner. Its BCCB layout is column-major: our ``torus(a, b)`` (row-major) is
    ``manifold_opt=(b, a)``.
    """
    from pydmd import PiDMD

    pidmd = PiDMD(manifold=manifold, manifold_opt=manifold_opt, compute_A=True, svd_rank=-1)
    pidmd.fit(trajectory.T)
    return np.asarray(pidmd.A).real
