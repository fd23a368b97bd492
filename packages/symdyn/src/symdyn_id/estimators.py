"""Known symmetry: :class:`EquivariantLinearSystem`, least squares on the commutant."""

from __future__ import annotations

import warnings
from typing import Any, Literal

import numpy as np

from .commutant import commutant_lstsq
from .fourier import dense_operator, fourier_lstsq
from .representation import Representation
from .validation import (
    NotExcitingWarning,
    ParamsMixin,
    check_nonnegative,
    check_state,
    check_trajectories,
    rescaled,
    warn_if_not_exciting,
)

Solver = Literal["auto", "fft", "basis"]


def relative_residual(a_hat: np.ndarray, states: np.ndarray, targets: np.ndarray) -> float:
    """``||Y - A X||_F / ||Y||_F`` over the transitions."""
    resid = targets - states @ a_hat.T
    return float(np.linalg.norm(resid) / max(np.linalg.norm(targets), np.finfo(float).tiny))


def fit_commutant(
    rep: Representation, states: np.ndarray, targets: np.ndarray, ridge: float, solver: Solver
) -> tuple[np.ndarray, int, int, str]:
    """``(A_hat, design rank, p, solver used)`` of least squares on C(rho)."""
    grid = rep.grid
    use_fft = grid is not None and grid.d == rep.d and solver in ("auto", "fft")
    if solver == "fft" and not use_fft:
        raise ValueError(
            f"solver='fft' needs a product of cyclic groups acting on a grid "
            f"(cyclic, torus, block of those); {rep.name} is not one"
        )
    if use_fft:
        assert grid is not None
        ops, rank = fourier_lstsq(grid, states, targets, ridge)
        return dense_operator(grid, ops), rank, grid.sites * grid.channels**2, "fft"
    comm = rep.commutant()
    res = commutant_lstsq(comm, states, targets, ridge)
    return comm.assemble(res.theta), res.rank, comm.dim, comm.kind


class EquivariantLinearSystem(ParamsMixin):
    """Identify ``x_{t+1} = A x_t`` with ``A rho(g) = rho(g) A`` from one trajectory.

    Parameters
    ----------
    representation
        The known group action (:class:`Representation`).
    ridge
        Penalty ``ridge * ||A||_F^2`` (0: plain least squares, minimum-norm when not identifiable).
    snapshots_axis
        0 (default): ``X`` is ``(T+1, d)``, time along rows (pysindy, scikit-learn); 1: ``(d, T+1)``,
        snapshots as columns (PyDMD).
    solver
        ``"auto"``: FFT for products of cyclic groups on a grid, else the commutant basis;
        ``"fft"`` or ``"basis"`` to force one.

    Attributes
    ----------
    A_ : (d, d) identified matrix, in the commutant.
    residual_ : ``||Y - A_ X||_F / ||Y||_F`` on the training transitions.
    design_rank_, n_params_ : rank of the ``dT x p`` design and p = dim C(rho).
    identifiable_ : ``design_rank_ == n_params_`` (reported, never truncated silently).
    min_trajectory_length_ : T*(rho); n_transitions_ : T used.
    """

    _param_names = ("representation", "ridge", "snapshots_axis", "solver")

    def __init__(
        self,
        representation: Representation,
        ridge: float = 0.0,
        snapshots_axis: int = 0,
        solver: Solver = "auto",
    ) -> None:
        self.representation = representation
        self.ridge = ridge
        self.snapshots_axis = snapshots_axis
        self.solver = solver

    def fit(self, X: Any, y: Any = None) -> EquivariantLinearSystem:
        """Fit on one trajectory ``(T+1, d)`` (or a list of trajectories); ``y`` is ignored."""
        rep = self.representation
        if not isinstance(rep, Representation):
            raise ValueError(f"representation must be a Representation, got {type(rep).__name__}")
        ridge = check_nonnegative(self.ridge, "ridge")
        if self.solver not in ("auto", "fft", "basis"):
            raise ValueError(f"solver must be 'auto', 'fft' or 'basis', got {self.solver!r}")
        states, targets = check_trajectories(X, self.snapshots_axis, rep.d)
        warn_if_not_exciting(states, targets)
        states, targets, scale = rescaled(states, targets)
        # ||Y - M X||^2 + ridge ||M||^2 at unit scale: the penalty scales by 1 / scale^2
        ridge = ridge / scale / scale
        a_hat, rank, p, used = fit_commutant(rep, states, targets, ridge, self.solver)
        self.A_ = a_hat
        self.design_rank_ = rank
        self.n_params_ = p
        self.identifiable_ = rank == p
        self.n_transitions_ = states.shape[0]
        self.n_features_in_ = rep.d
        self.solver_ = used
        self.residual_ = relative_residual(a_hat, states, targets)
        self.min_trajectory_length_ = rep.min_trajectory_length()
        if not self.identifiable_:
            self._warn_not_identifiable()
        return self

    def _warn_not_identifiable(self) -> None:
        t, t_star = self.n_transitions_, self.min_trajectory_length_
        if t < t_star:
            why = f"{t} transitions < T* = {t_star}"
        else:
            why = f"not persistently exciting at T = {t} >= T* = {t_star}"
        warnings.warn(
            f"A is not identifiable: design rank {self.design_rank_} < p = {self.n_params_} "
            f"({why}); the minimum-norm solution is returned",
            NotExcitingWarning,
            stacklevel=3,
        )

    def _check_fitted(self) -> None:
        if not hasattr(self, "A_"):
            raise ValueError(f"this {type(self).__name__} is not fitted yet: call fit first")

    def coefficients(self) -> np.ndarray:
        """The identified matrix (pysindy's name for it)."""
        self._check_fitted()
        return self.A_.copy()

    def predict(self, x0: Any, n_steps: int = 1) -> np.ndarray:
        """Roll out ``n_steps`` from ``x0``: ``(n_steps, d)`` for ``x0`` of shape ``(d,)``, or
        ``(n, n_steps, d)`` for a batch ``(n, d)``. Row ``k`` is ``A^(k+1) x0``."""
        self._check_fitted()
        return rollout(self.A_, check_state(x0, self.n_features_in_), n_steps)

    def score(self, X: Any, y: Any = None) -> float:
        """R^2 of one-step predictions on the transitions of ``X``: ``1 - RSS / TSS``."""
        self._check_fitted()
        states, targets = check_trajectories(X, self.snapshots_axis, self.n_features_in_)
        return one_step_r2(self.A_, states, targets)


def rollout(a_hat: np.ndarray, x0: np.ndarray, n_steps: int) -> np.ndarray:
    """States ``A x0, A^2 x0, ..., A^n x0`` (``x0``: ``(d,)`` or ``(n, d)``)."""
    if not isinstance(n_steps, (int, np.integer)) or n_steps < 1:
        raise ValueError(f"n_steps must be a positive integer, got {n_steps!r}")
    batch = np.atleast_2d(x0)
    out = np.empty((batch.shape[0], n_steps, batch.shape[1]))
    state = batch
    for k in range(n_steps):
        state = state @ a_hat.T
        out[:, k] = state
    return out[0] if x0.ndim == 1 else out


def one_step_r2(a_hat: np.ndarray, states: np.ndarray, targets: np.ndarray) -> float:
    resid = targets - states @ a_hat.T
    centred = targets - targets.mean(axis=0)
    tss = float((centred * centred).sum())
    return 1.0 - float((resid * resid).sum()) / max(tss, np.finfo(float).tiny)
