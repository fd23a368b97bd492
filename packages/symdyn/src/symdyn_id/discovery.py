"""Unknown symmetry: :class:`SymmetryDiscovery` picks the group from one trajectory [R].

Procedure (spec section 2.3, a reconstruction: the paper's text is not public):

1. every candidate group of a library gets its commutant basis;
2. commutant least squares per candidate: normalised residual ``r = ||Y - A X|| / ||Y||``,
   ``p = dim C`` and identifiability (design rank ``== p``);
3. a candidate is *consistent* when it is identifiable, **has spare equations** (``dT > p``: with
   ``dT = p`` a commutant of dimension p fits any data, so a zero residual says nothing) and
   its residual passes the threshold: noise-free ``r <= 1e-8``; a user ``tol``: ``r <= tol``; known
   process noise sigma: ``RSS <= sigma^2 (n - p + 3 sqrt(2 (n - p)))``, ``n = dT`` (3 standard
   deviations above the chi-square(n - p) law of the true group's RSS; the spec's example
   ``3 sigma sqrt(dT) / ||Y||`` lets wrong groups through on decaying trajectories), or, with
   ``criterion="bic"``, it minimises ``n log(RSS / n) + p log n`` among the candidates with spare
   equations;
4. the consistent candidate with the **smallest p** (largest symmetry) wins, ties broken by the
   error on the last transition held out;
5. adaptive stopping: transitions are taken one at a time and discovery stops at the first length
   with a unique winner (with BIC: the same winner at two consecutive lengths).

Candidates are independent: ``n_jobs`` evaluates them with joblib (any joblib backend, e.g. Dask or
Ray through ``joblib.parallel_config``, spreads them over machines).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from .estimators import EquivariantLinearSystem, fit_commutant, one_step_r2, relative_residual
from .representation import Representation
from .validation import (
    ParamsMixin,
    check_nonnegative,
    check_state,
    check_trajectories,
    rescaled,
)

Criterion = Literal["residual", "bic"]
NOISE_FREE_TOL = 1e-8


class NoConsistentCandidateWarning(UserWarning):
    """No candidate group explains the trajectory: trivial-group least squares is returned."""


def _divisors(d: int) -> list[int]:
    return [k for k in range(2, d // 2 + 1) if d % k == 0]


def default_library(d: int, grids: bool = True, blocks: bool = True) -> list[Representation]:
    """The default permutation library on d sites: trivial, C_d, D_d, S_d; for each factorisation
    ``d = a b`` the tori C_a x C_b and grid products D_a x D_b; for each ``d = n k`` the block
    versions C_n, D_n, S_n (x) R^k. Candidates with equal commutants are kept once."""
    reps = [Representation.trivial(d), Representation.cyclic(d), Representation.symmetric(d)]
    if d >= 3:
        reps.insert(2, Representation.dihedral(d))
    for a in _divisors(d) if grids else []:
        b = d // a
        reps.append(Representation.torus(a, b))
        if a >= 3 and b >= 3:
            reps.append(
                Representation.product(Representation.dihedral(a), Representation.dihedral(b))
            )
    for k in _divisors(d) if blocks else []:
        n = d // k
        reps.append(Representation.block(Representation.cyclic(n), k))
        if n >= 3:
            reps.append(Representation.block(Representation.dihedral(n), k))
        reps.append(Representation.block(Representation.symmetric(n), k))
    return unique_commutants(reps)


def unique_commutants(reps: Sequence[Representation]) -> list[Representation]:
    """``reps`` without those whose commutant equals an earlier one's (indistinguishable)."""
    seen: set[bytes] = set()
    out = []
    for rep in reps:
        comm = rep.commutant()
        key = b"full" if comm.labels is None else comm.labels.tobytes()
        if comm.kind == "dense":
            out.append(rep)  # matrix actions: no cheap canonical form, keep them all
            continue
        key = key + str(rep.d).encode()
        if key not in seen:
            seen.add(key)
            out.append(rep)
    return out


@dataclasses.dataclass
class CandidateScore:
    """One candidate at one trajectory length."""

    name: str
    p: int
    n_equations: int  # dT
    testable: bool  # dT > p: the residual can refute the candidate
    identifiable: bool = False
    design_rank: int = 0
    residual: float = math.nan
    rss: float = math.nan
    bic: float = math.nan
    threshold: float = math.nan  # the largest residual r that counts as consistent
    consistent: bool = False

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def score_candidate(rep: Representation, states: np.ndarray, targets: np.ndarray) -> CandidateScore:
    """Commutant least squares of one candidate (skipped when it has no spare equations)."""
    n = targets.size
    p = rep.commutant_dim
    score = CandidateScore(name=rep.name, p=p, n_equations=n, testable=n > p)
    if not score.testable:
        return score
    a_hat, rank, _, _ = fit_commutant(rep, states, targets, 0.0, "auto")
    resid = targets - states @ a_hat.T
    score.rss = float((resid * resid).sum())
    score.residual = relative_residual(a_hat, states, targets)
    score.design_rank = rank
    score.identifiable = rank == p
    floor = (1e-13 * float(np.linalg.norm(targets))) ** 2  # noise-free fits: log(0) guard
    score.bic = n * math.log(max(score.rss, floor, np.finfo(float).tiny) / n) + p * math.log(n)
    return score


class SymmetryDiscovery(ParamsMixin):
    """Find the symmetry group of ``x_{t+1} = A x_t`` from one trajectory, then identify A.

    Parameters
    ----------
    candidates
        A list of :class:`Representation` (all on the same R^d) or ``"permutation_default"``
        (:func:`default_library` for the trajectory's d).
    criterion
        ``"residual"`` (threshold ``tol``, or the chi-square bound from ``noise_std``, or 1e-8 for
        noise-free data) or ``"bic"`` (no noise level needed).
    tol, noise_std
        The residual threshold, or the process-noise standard deviation it is derived from.
    adaptive
        Take the trajectory one transition at a time and stop at the first length with a unique
        winner (``n_transitions_used_``); otherwise use every transition.
    n_jobs
        joblib workers over the candidates (None: sequential).
    snapshots_axis
        0: ``(T+1, d)`` rows (default); 1: PyDMD's ``(d, T+1)`` columns.

    Attributes
    ----------
    representation_, estimator_ (the fitted :class:`EquivariantLinearSystem`), A_,
    n_transitions_used_, done_, scores_ (one dict per candidate at the deciding length, with its
    residual, p, design rank, threshold and verdict), history_ (``(T, winner name or None)`` per length examined).
    """

    _param_names = (
        "candidates",
        "criterion",
        "tol",
        "noise_std",
        "adaptive",
        "n_jobs",
        "snapshots_axis",
    )

    def __init__(
        self,
        candidates: Sequence[Representation] | str = "permutation_default",
        criterion: Criterion = "residual",
        tol: float | None = None,
        noise_std: float | None = None,
        adaptive: bool = True,
        n_jobs: int | None = None,
        snapshots_axis: int = 0,
    ) -> None:
        self.candidates = candidates
        self.criterion = criterion
        self.tol = tol
        self.noise_std = noise_std
        self.adaptive = adaptive
        self.n_jobs = n_jobs
        self.snapshots_axis = snapshots_axis

    # -- set-up ------------------------------------------------------------------------------
    def _library(self, d: int) -> list[Representation]:
        if isinstance(self.candidates, str):
            if self.candidates != "permutation_default":
                raise ValueError(
                    f"candidates must be a list of Representation or 'permutation_default', "
                    f"got {self.candidates!r}"
                )
            return default_library(d)
        library = list(self.candidates)
        if not library:
            raise ValueError("the candidate library is empty: give at least one Representation")
        for i, rep in enumerate(library):
            if not isinstance(rep, Representation):
                raise ValueError(f"candidate {i} is a {type(rep).__name__}, not a Representation")
            if rep.d != d:
                raise ValueError(f"candidate {i} ({rep.name}) acts on R^{rep.d}, the data on R^{d}")
        return library

    def _check_params(self) -> None:
        if self.criterion not in ("residual", "bic"):
            raise ValueError(f"criterion must be 'residual' or 'bic', got {self.criterion!r}")
        if self.tol is not None:
            check_nonnegative(self.tol, "tol")
        if self.noise_std is not None:
            check_nonnegative(self.noise_std, "noise_std")
        if self.n_jobs is not None and (not isinstance(self.n_jobs, int) or self.n_jobs == 0):
            raise ValueError(f"n_jobs must be None or a nonzero int, got {self.n_jobs!r}")

    def _candidate_d(self) -> int | None:
        if isinstance(self.candidates, str):
            return None
        library = list(self.candidates)
        return library[0].d if library and isinstance(library[0], Representation) else None

    # -- fitting -----------------------------------------------------------------------------
    def fit(self, X: Any, y: Any = None) -> SymmetryDiscovery:
        """Discover the group from one trajectory ``(T+1, d)``; ``y`` is ignored."""
        self._check_params()
        states, targets = check_trajectories(X, self.snapshots_axis, self._candidate_d())
        self._start(states.shape[1])
        self._states, self._targets = states, targets
        self._trajectory: list[np.ndarray] = []
        several = isinstance(X, (list, tuple)) and len(X) > 0 and np.ndim(X[0]) == 2
        if not several:  # one trajectory: partial_fit may go on from its end
            self._trajectory = list(np.vstack([states[:1], targets]))
        lengths = range(1, states.shape[0] + 1) if self.adaptive else [states.shape[0]]
        for t in lengths:
            self._examine(t)
            if self.done_ and self.adaptive:
                break
        self._finish()
        return self

    def partial_fit(self, x_next: Any) -> SymmetryDiscovery:
        """Append one state ``(d,)`` (or several ``(n, d)``) and re-examine the candidates.

        Until ``done_``, ``A_`` is trivial-group least squares (minimum norm) and
        ``representation_`` the trivial group."""
        self._check_params()
        if not hasattr(self, "_trajectory"):
            d = self._candidate_d() or np.asarray(x_next).shape[-1]
            self._start(d)
            self._trajectory = []
        if np.shape(x_next)[-1:] != (self._d,):
            raise ValueError(
                f"partial_fit got a state of shape {np.shape(x_next)}, expected ({self._d},) or "
                f"(n, {self._d}): this discovery was started with d = {self._d}"
            )
        new = np.atleast_2d(check_state(x_next, self._d))
        self._trajectory.extend(new)
        if len(self._trajectory) < 2:
            return self
        traj = np.asarray(self._trajectory)
        self._states, self._targets = traj[:-1], traj[1:]
        self._examine(self._states.shape[0])
        # mid-stream, no winner yet is the normal state (done_ says so): no warning until fit
        self._finish(warn=False)
        return self

    def _start(self, d: int) -> None:
        self._d = d
        self._library_ = self._library(d)
        for rep in self._library_:
            rep.commutant()  # once, in this process (joblib workers get it with the candidate)
        self.done_ = False
        self.n_transitions_used_: int | None = None
        self.history_: list[tuple[int, str | None]] = []
        self._scores: list[CandidateScore] = []
        self._winner: int | None = None

    def _threshold(self, score: CandidateScore, targets: np.ndarray, scale: float = 1.0) -> float:
        """The largest normalised residual ``r`` at which ``score``'s candidate is consistent.

        ``targets`` are the data divided by ``scale`` (see :func:`rescaled`)."""
        if self.tol is not None:
            return float(self.tol)
        if self.noise_std is not None:
            dof = score.n_equations - score.p
            rss = (self.noise_std / scale) ** 2 * (dof + 3.0 * math.sqrt(2.0 * dof))
            return math.sqrt(rss) / float(np.linalg.norm(targets))
        return NOISE_FREE_TOL

    def _score_all(self, states: np.ndarray, targets: np.ndarray) -> list[CandidateScore]:
        library = self._library_
        if self.n_jobs in (None, 1):
            return [score_candidate(rep, states, targets) for rep in library]
        from joblib import Parallel, delayed

        return list(
            Parallel(n_jobs=self.n_jobs)(
                delayed(score_candidate)(rep, states, targets) for rep in library
            )
        )

    def _examine(self, t: int) -> None:
        states, targets, scale = rescaled(self._states[:t], self._targets[:t])
        scores = self._score_all(states, targets)
        ok = [i for i, s in enumerate(scores) if s.testable and s.identifiable]
        if self.criterion == "bic":
            best = min(ok, key=lambda i: scores[i].bic) if ok else None
            for i in ok:
                scores[i].consistent = i == best
            previous = self.history_[-1][1] if self.history_ else None
            winner, unique = best, best is not None and scores[best].name == previous
        else:
            for i in ok:
                scores[i].threshold = self._threshold(scores[i], targets, scale)
                scores[i].consistent = scores[i].residual <= scores[i].threshold
            winner, unique = self._smallest_consistent(scores, states, targets)
        self.history_.append((t, None if winner is None else scores[winner].name))
        self._scores, self._winner = scores, winner
        self._length = t
        if unique and not self.done_:
            self.done_ = True
            self.n_transitions_used_ = t

    def _smallest_consistent(
        self, scores: list[CandidateScore], states: np.ndarray, targets: np.ndarray
    ) -> tuple[int | None, bool]:
        consistent = [i for i, s in enumerate(scores) if s.consistent]
        if not consistent:
            return None, False
        p_min = min(scores[i].p for i in consistent)
        tied = [i for i in consistent if scores[i].p == p_min]
        if len(tied) == 1:
            return tied[0], True
        return min(tied, key=lambda i: self._holdout(i, states, targets)), False

    def _holdout(self, i: int, states: np.ndarray, targets: np.ndarray) -> float:
        # error on the last transition of a fit on the others
        if states.shape[0] < 2:
            return math.inf
        rep = self._library_[i]
        a_hat = fit_commutant(rep, states[:-1], targets[:-1], 0.0, "auto")[0]
        return relative_residual(a_hat, states[-1:], targets[-1:])

    def _finish(self, warn: bool = True) -> None:
        t = self._length
        states, targets = self._states[:t], self._targets[:t]
        if self._winner is None and warn:
            self._check_noise_free(states, targets)
            warnings.warn(
                f"no candidate is consistent with the trajectory at T = {t}: returning trivial-group least squares; if the data are "
                "noisy pass noise_std= or tol=, or use criterion='bic'",
                NoConsistentCandidateWarning,
                stacklevel=3,
            )
        if self._winner is None:
            rep = Representation.trivial(self._d)
        else:
            rep = self._library_[self._winner]
        with warnings.catch_warnings():
            # a trivial-group fallback on a short trajectory is underdetermined by construction:
            # the warning above already says so.
            if self._winner is None:
                warnings.simplefilter("ignore")
            est = EquivariantLinearSystem(rep).fit(np.vstack([states, targets[-1:]]))
        self.representation_ = rep
        self.estimator_ = est
        self.A_ = est.A_
        self.scores_ = [s.as_dict() for s in self._scores]

    def _check_noise_free(self, states: np.ndarray, targets: np.ndarray) -> None:
        # Noise-free mode (no tol, no noise_std): once T > d plain least squares must fit exactly;
        # if it does not, the data are noisy and the default threshold is the wrong one.
        if self.criterion != "residual" or self.tol is not None or self.noise_std is not None:
            return
        d = states.shape[1]
        if states.shape[0] <= d:
            return
        states, targets, _ = rescaled(states, targets)
        sol = np.linalg.lstsq(states, targets, rcond=None)[0]
        resid = relative_residual(sol.T, states, targets)
        if resid > NOISE_FREE_TOL:
            raise ValueError(
                f"criterion='residual' without noise_std or tol assumes noise-free data, but even "
                f"unconstrained least squares leaves residual {resid:.3g} > {NOISE_FREE_TOL:g}: "
                "pass noise_std= (or tol=), or use criterion='bic'"
            )

    # -- using the result ------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "estimator_"):
            raise ValueError("this SymmetryDiscovery is not fitted yet: call fit or partial_fit")

    @property
    def min_trajectory_length_(self) -> int:
        """T* of the selected group."""
        self._check_fitted()
        return self.estimator_.min_trajectory_length_

    def predict(self, x0: Any, n_steps: int = 1) -> np.ndarray:
        """Roll out the identified system; see :meth:`EquivariantLinearSystem.predict`."""
        self._check_fitted()
        return self.estimator_.predict(x0, n_steps)

    def score(self, X: Any, y: Any = None) -> float:
        """R^2 of one-step predictions on ``X``."""
        self._check_fitted()
        states, targets = check_trajectories(X, self.snapshots_axis, self._d)
        return one_step_r2(self.A_, states, targets)
