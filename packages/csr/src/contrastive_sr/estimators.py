"""``ContrastiveSymbolicRegressor``: the CSR configuration of ``CSR.py`` as a scikit-learn estimator."""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import BaseEstimator, RegressorMixin, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import (
    check_array,
    check_is_fitted,
    column_or_1d,
    validate_data,
)
from threadpoolctl import threadpool_limits

from contrastive_sr.dpp import dpp_greedy_select
from contrastive_sr.encoding import encode, fit_target_encoder, split_columns
from contrastive_sr.learners import (
    BASE_LEARNERS,
    LearnerSpec,
    Member,
    fit_member,
    fitness_predictions,
)
from contrastive_sr.neighbors import WEIGHTS, kneighbors
from contrastive_sr.primitives import DEFAULT_PRIMITIVES, resolve_primitives
from contrastive_sr.selection import double_lexicase, lexicase, tournament
from contrastive_sr.trees import (
    Individual,
    crossover,
    evaluate_individual,
    mutate,
    random_tree,
    size,
    to_string,
)

SELECTIONS = ("double_lexicase", "lexicase", "tournament")
ARCHIVES = ("dpp", "top")


def r2(y: np.ndarray, pred: np.ndarray) -> float:
    if not np.all(np.isfinite(pred)):
        return -np.inf
    return float(1.0 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2))


def _evaluate_batch(
    batch: Sequence[Individual], X: np.ndarray, y: np.ndarray, spec: LearnerSpec, seeds: Sequence
) -> list[tuple[float, np.ndarray]]:
    out = []
    for ind, seed in zip(batch, seeds, strict=True):
        pred = fitness_predictions(
            evaluate_individual(ind, X), y, spec, np.random.default_rng(seed)
        )
        out.append((r2(y, pred), pred))
    return out


# TransformerMixin: transform() maps X to the learned space ΦW (fit_transform, set_output)
class ContrastiveSymbolicRegressor(RegressorMixin, TransformerMixin, BaseEstimator):
    """Contrastive Symbolic Regression (Zhang et al., ICML 2026).

    Genetic programming evolves individuals of ``n_features`` trees (constructed features Φ). Each is
    scored by the in-sample R² of ridge on Φ plus a linear-rank k-NN on the ridge residuals in a
    contrastive space ``Φ W`` (W in closed form). Parents come from double lexicase; a DPP archive
    keeps ``ensemble_size`` accurate, diverse individuals; each becomes a final model (ridge +
    contrastive W + k-NN with leave-one-out K) and predictions are averaged.

    Defaults are the official configuration (``CSR.py``): ``n_gen=50, n_pop=200``.

    Parameters
    ----------
    n_gen, n_pop : int
        Generations after the initial population, and population size
        (``n_pop * (n_gen + 1)`` evaluations).
    n_features : int
        GP trees per individual.
    max_height : int
        Static height limit of variation.
    init_depth : (int, int)
        Height range of ramped half-and-half initial trees and mutation subtrees.
    primitives : sequence of str
        Names from :data:`contrastive_sr.primitives.PRIMITIVES`.
    p_crossover, p_mutation : float in [0, 1]
    root_crossover : bool
        Let a tree's root be a crossover point.
    selection : {"double_lexicase", "lexicase", "tournament"}
    lexicase_rounds : int
        Lexicase winners the size roulette chooses among.
    base_learner : str
        One of :data:`contrastive_sr.learners.BASE_LEARNERS` (the paper's ablations);
        ``"lr+cl+loo-knn"`` is CSR.
    contrastive_reg : float
        λ of the contrastive solve.
    contrastive_subsample : int
        Rows of the contrastive solve.
    n_neighbors : "adaptive" or int
        Evolution-phase K (``adaptive``: 5 if n ≤ 200 else 30).
    k_max : int
        Largest K of the final leave-one-out choice.
    knn_weights, final_knn_weights : {"uniform", "linear_rank"}
        Weights of the evolution-phase k-NN and of the final leave-one-out k-NN.
    ensemble_size : int
    ensemble_selection : {"dpp", "top"}
    normalize : bool
        Standardise X and y before evolution.
    categorical_encoding : "target" or None
        Target-encode non-numeric columns, or raise ``TypeError`` on them (None).
    knn_backend : {"numpy", "torch"}
    n_jobs : int or None
        joblib workers for fitness evaluation (results identical for any value).
    random_state : int, RandomState or None
    verbose : bool

    Attributes
    ----------
    archive_ : list of Member
        Final models, best training fitness first.
    archive_fitness_ : ndarray
        Evolution-phase fitness of each archive member.
    best_fitness_ : float
    k_selected_ : list of int
        K of each member's final k-NN (0: constant fallback or no k-NN).
    n_evaluations_ : int
    fitness_history_ : list of float
        Best fitness per generation.
    n_features_in_, feature_names_in_
    """

    def __init__(
        self,
        n_gen: int = 50,
        n_pop: int = 200,
        n_features: int = 10,
        max_height: int = 10,
        init_depth: tuple[int, int] = (0, 2),
        primitives: Sequence[str] = DEFAULT_PRIMITIVES,
        p_crossover: float = 0.9,
        p_mutation: float = 0.1,
        root_crossover: bool = True,
        selection: str = "double_lexicase",
        lexicase_rounds: int = 2,
        base_learner: str = "lr+cl+loo-knn",
        contrastive_reg: float = 0.1,
        contrastive_subsample: int = 100,
        n_neighbors: int | str = "adaptive",
        k_max: int = 30,
        knn_weights: str = "linear_rank",
        final_knn_weights: str = "uniform",
        ensemble_size: int = 30,
        ensemble_selection: str = "dpp",
        normalize: bool = True,
        categorical_encoding: str | None = "target",
        knn_backend: str = "numpy",
        n_jobs: int | None = 1,
        random_state: Any = None,
        verbose: bool = False,
    ) -> None:
        self.n_gen = n_gen
        self.n_pop = n_pop
        self.n_features = n_features
        self.max_height = max_height
        self.init_depth = init_depth
        self.primitives = primitives
        self.p_crossover = p_crossover
        self.p_mutation = p_mutation
        self.root_crossover = root_crossover
        self.selection = selection
        self.lexicase_rounds = lexicase_rounds
        self.base_learner = base_learner
        self.contrastive_reg = contrastive_reg
        self.contrastive_subsample = contrastive_subsample
        self.n_neighbors = n_neighbors
        self.k_max = k_max
        self.knn_weights = knn_weights
        self.final_knn_weights = final_knn_weights
        self.ensemble_size = ensemble_size
        self.ensemble_selection = ensemble_selection
        self.normalize = normalize
        self.categorical_encoding = categorical_encoding
        self.knn_backend = knn_backend
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # non-numeric columns are target-encoded (categorical_encoding="target")
        tags.input_tags.categorical = True
        tags.input_tags.string = True
        return tags

    # -- validation -------------------------------------------------------------------------
    def _check_params(self) -> None:
        def integer(name: str, low: int) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {v!r}")

        for name, low in (("n_gen", 0), ("n_pop", 2), ("n_features", 1), ("max_height", 0),
                          ("lexicase_rounds", 1), ("contrastive_subsample", 2), ("k_max", 1),
                          ("ensemble_size", 1)):  # fmt: skip
            integer(name, low)
        for name in ("p_crossover", "p_mutation"):
            v = getattr(self, name)
            if not isinstance(v, numbers.Real) or not 0.0 <= float(v) <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1], got {v!r}")
        if not isinstance(self.contrastive_reg, numbers.Real) or self.contrastive_reg < 0:
            raise ValueError(f"contrastive_reg must be a float >= 0, got {self.contrastive_reg!r}")
        lo, hi = self.init_depth
        if not 0 <= lo <= hi <= self.max_height:
            raise ValueError(
                f"init_depth must be (low, high) with 0 <= low <= high <= max_height="
                f"{self.max_height}, got {self.init_depth!r}"
            )
        resolve_primitives(list(self.primitives))
        choices = {
            "selection": SELECTIONS,
            "base_learner": tuple(BASE_LEARNERS),
            "knn_weights": WEIGHTS,
            "final_knn_weights": WEIGHTS,
            "ensemble_selection": ARCHIVES,
            "categorical_encoding": ("target", None),
            "knn_backend": ("numpy", "torch"),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.ensemble_size > self.n_pop:
            raise ValueError(
                f"ensemble_size={self.ensemble_size} exceeds n_pop={self.n_pop}; "
                "the archive is drawn from the population"
            )
        k = self.n_neighbors
        if k != "adaptive" and (
            isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1
        ):
            raise ValueError(f"n_neighbors must be 'adaptive' or an integer >= 1, got {k!r}")

    def _prepare_X(self, X: Any, y: np.ndarray | None) -> np.ndarray:
        """Target-encode categorical columns (fit when ``y`` is given) and validate."""
        columns, names, has_categorical = split_columns(X)
        if y is not None:
            self._encoder = None
            if has_categorical:
                if self.categorical_encoding is None:
                    raise TypeError(
                        "X has non-numeric (categorical) columns and categorical_encoding=None; "
                        "encode them first or set categorical_encoding='target'"
                    )
                self._encoder = fit_target_encoder(columns, y)
        encoder = getattr(self, "_encoder", None)
        if encoder is not None and columns:
            if y is None and len(columns) != self.n_features_in_:
                raise ValueError(
                    f"X has {len(columns)} features, but ContrastiveSymbolicRegressor is expecting "
                    f"{self.n_features_in_} features as input"
                )
            X_num = encode(encoder, columns)
            if names is not None:
                import pandas as pd

                X = pd.DataFrame(X_num, columns=names)
            else:
                X = X_num
        if y is None:
            return validate_data(self, X, dtype=np.float64, reset=False)
        X, _ = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        return X

    def _spec(self, n: int) -> LearnerSpec:
        ridge, contrastive, knn = BASE_LEARNERS[self.base_learner]
        k = (5 if n <= 200 else 30) if self.n_neighbors == "adaptive" else int(self.n_neighbors)
        if k > n:
            warnings.warn(f"n_neighbors={k} > n_samples={n}; clamped to {n}", stacklevel=3)
            k = n
        k_max = int(self.k_max)
        if knn == "loo" and k_max > n - 1:
            warnings.warn(
                f"k_max={k_max} >= n_samples={n}; clamped to n_samples - 1 = {n - 1}", stacklevel=3
            )
            k_max = n - 1
        return LearnerSpec(ridge, contrastive, knn, k, k_max, self.knn_weights,
                           self.final_knn_weights, float(self.contrastive_reg),
                           int(self.contrastive_subsample), self.knn_backend)  # fmt: skip

    # -- fit --------------------------------------------------------------------------------
    def fit(self, X: Any, y: Any) -> ContrastiveSymbolicRegressor:
        """Evolve, build the archive and fit its final models. Returns ``self``."""
        self._check_params()
        if y is None:
            raise ValueError(
                "ContrastiveSymbolicRegressor requires y to be passed, but the target y is None"
            )
        y_arr = np.asarray(y)
        if y_arr.ndim == 2 and y_arr.shape[1] > 1:
            raise ValueError(
                f"y has shape {y_arr.shape}: multi-output regression is not supported, "
                "fit one ContrastiveSymbolicRegressor per output"
            )
        y = column_or_1d(
            check_array(y_arr, ensure_2d=False, dtype=np.float64, input_name="y"), warn=True
        )
        X = self._prepare_X(X, y)
        n = X.shape[0]
        if n < 3:
            raise ValueError(
                f"ContrastiveSymbolicRegressor needs at least 3 samples, got n_samples={n}"
            )
        if np.ptp(y) == 0:
            raise ValueError(
                f"y is constant (every value is {y[0]!r}): there is nothing to regress; "
                "use sklearn.dummy.DummyRegressor for a constant model"
            )
        self.x_mean_ = X.mean(axis=0) if self.normalize else np.zeros(X.shape[1])
        std = X.std(axis=0)
        self.x_scale_ = np.where(std > 0, std, 1.0) if self.normalize else np.ones(X.shape[1])
        self.y_mean_ = float(y.mean()) if self.normalize else 0.0
        self.y_scale_ = float(y.std()) if self.normalize else 1.0
        self.y_train_ = y.copy()
        Xs = (X - self.x_mean_) / self.x_scale_
        ys = (y - self.y_mean_) / self.y_scale_
        spec = self._spec(n)
        rng = np.random.default_rng(check_random_state(self.random_state).randint(2**31 - 1))
        # thousands of small matrix products: BLAS threads cost more than they save (and
        # oversubscribe a busy machine); parallelism is n_jobs' business
        with threadpool_limits(1):
            archive = self._evolve(Xs, ys, spec, rng)
            seeds = rng.integers(2**63, size=len(archive))
            self.archive_ = [
                fit_member(a[0], evaluate_individual(a[0], Xs), ys, spec, np.random.default_rng(s))
                for a, s in zip(archive, seeds, strict=True)
            ]
        self.archive_fitness_ = np.array([a[1] for a in archive])
        self.best_fitness_ = float(self.archive_fitness_[0])
        self.k_selected_ = [m.k for m in self.archive_]
        return self

    def _evaluate(
        self, pop: list[Individual], X: np.ndarray, y: np.ndarray, spec: LearnerSpec,
        rng: np.random.Generator,
    ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        # seeds drawn here, in population order: the same results for any n_jobs
        seeds = list(rng.integers(2**63, size=len(pop)))
        jobs = self.n_jobs if self.n_jobs is not None else 1
        if jobs == 1:
            results = _evaluate_batch(pop, X, y, spec, seeds)
        else:
            n_chunks = min(len(pop), 4 * (abs(jobs) if jobs > 0 else 8))
            bounds = np.linspace(0, len(pop), n_chunks + 1).astype(int)
            parts = Parallel(n_jobs=jobs)(
                delayed(_evaluate_batch)(pop[a:b], X, y, spec, seeds[a:b])
                for a, b in pairwise(bounds)
                if b > a
            )
            results = [r for part in parts for r in part]
        self.n_evaluations_ += len(pop)
        fitness = np.array([f for f, _ in results])
        return fitness, np.stack([p for _, p in results])

    def _select(self, rng, fitness, preds, y, pop) -> list[int]:
        n = len(pop)
        if self.selection == "tournament":
            return tournament(rng, fitness, n)
        errors = (preds - y[None, :]) ** 2
        if self.selection == "lexicase":
            return lexicase(rng, errors, n)
        sizes = np.array([size(ind) for ind in pop])
        return double_lexicase(rng, errors, sizes, n, int(self.lexicase_rounds))

    def _vary(self, rng: np.random.Generator, parents: list[Individual], n_inputs: int):
        prims = resolve_primitives(list(self.primitives))
        init = (int(self.init_depth[0]), int(self.init_depth[1]))
        out = list(parents)
        for i in range(0, len(out) - 1, 2):
            if rng.random() < self.p_crossover:
                out[i], out[i + 1] = crossover(
                    rng, out[i], out[i + 1], bool(self.root_crossover), int(self.max_height)
                )
        for i in range(len(out)):
            if rng.random() < self.p_mutation:
                out[i] = mutate(rng, out[i], prims, n_inputs, init, int(self.max_height))
        return out

    def _update_archive(self, archive, pop, fitness, preds, y):
        q = int(self.ensemble_size)
        top = np.argsort(-fitness, kind="stable")[:q]
        cands = list(archive)
        seen = {a[0] for a in cands}
        for i in top:
            if pop[i] not in seen and np.isfinite(fitness[i]):
                cands.append((pop[i], float(fitness[i]), preds[i]))
                seen.add(pop[i])
        f = np.array([c[1] for c in cands])
        if self.ensemble_selection == "top" or len(cands) <= q:
            chosen = list(np.argsort(-f, kind="stable")[:q])
        else:
            quality = (f - f.min()) / (f.max() - f.min() + 1e-300) + 1e-12
            residuals = np.stack([c[2] for c in cands]) - y[None, :]
            chosen = dpp_greedy_select(quality, residuals, q)
        chosen = sorted(chosen, key=lambda i: -f[i])
        return [cands[i] for i in chosen]

    def _evolve(self, X: np.ndarray, y: np.ndarray, spec: LearnerSpec, rng: np.random.Generator):
        prims = resolve_primitives(list(self.primitives))
        lo, hi = int(self.init_depth[0]), int(self.init_depth[1])
        p = X.shape[1]
        pop: list[Individual] = [
            tuple(random_tree(rng, prims, p, lo, hi) for _ in range(int(self.n_features)))
            for _ in range(int(self.n_pop))
        ]
        self.n_evaluations_ = 0
        self.fitness_history_: list[float] = []
        fitness, preds = self._evaluate(pop, X, y, spec, rng)
        archive = self._update_archive([], pop, fitness, preds, y)
        self.fitness_history_.append(float(fitness.max()))
        for gen in range(int(self.n_gen)):
            parents = [pop[i] for i in self._select(rng, fitness, preds, y, pop)]
            pop = self._vary(rng, parents, p)
            fitness, preds = self._evaluate(pop, X, y, spec, rng)
            archive = self._update_archive(archive, pop, fitness, preds, y)
            self.fitness_history_.append(float(fitness.max()))
            if self.verbose:
                print(f"gen {gen + 1}/{self.n_gen}: best fitness {fitness.max():.4f}")
        return archive

    # -- use --------------------------------------------------------------------------------
    def _standardise(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "archive_")
        return (self._prepare_X(X, None) - self.x_mean_) / self.x_scale_

    def _member(self, member: int) -> Member:
        check_is_fitted(self, "archive_")
        if not isinstance(member, numbers.Integral) or not 0 <= member < len(self.archive_):
            raise ValueError(f"member must be in [0, {len(self.archive_)}), got {member!r}")
        return self.archive_[member]

    def predict(self, X: Any) -> np.ndarray:
        """Average prediction of the archive's final models."""
        Xs = self._standardise(X)
        preds = [m.predict_features(evaluate_individual(m.individual, Xs)) for m in self.archive_]
        return np.mean(preds, axis=0) * self.y_scale_ + self.y_mean_

    def constructed_features(self, X: Any, member: int = 0) -> np.ndarray:
        """The raw tree outputs Φ of one archive member (what :meth:`get_expressions` prints)."""
        m = self._member(member)
        return evaluate_individual(m.individual, self._standardise(X))

    def transform(self, X: Any) -> np.ndarray:
        """The best member's learned space ``Φ W`` (scaled features times the contrastive W)."""
        m = self._member(0)
        return m.scaling(evaluate_individual(m.individual, self._standardise(X))) @ m.W

    def get_expressions(self, member: int = 0) -> list[str]:
        """Sympy-parsable formulas of a member's trees over the input feature names.

        Names are ``feature_names_in_`` when those are Python identifiers, else ``x0, x1, ...``;
        the standardisation of ``normalize=True`` is written into the formula.
        """
        m = self._member(member)
        names = [f"x{j}" for j in range(self.n_features_in_)]
        given = getattr(self, "feature_names_in_", None)
        if given is not None and all(str(g).isidentifier() for g in given):
            names = [str(g) for g in given]
        if self.normalize:
            names = [
                f"(({nm} - {mu!r})/{sd!r})"
                for nm, mu, sd in zip(
                    names, self.x_mean_.tolist(), self.x_scale_.tolist(), strict=True
                )
            ]
        return [to_string(tree, names) for tree in m.individual]

    def explain_instance(self, x: Any, k: int = 5) -> Any:
        """The ``k`` training cases nearest to ``x`` in the best member's learned space.

        A pandas DataFrame with the training row index, the distance in ``Φ W`` and the target.
        """
        import pandas as pd

        m = self._member(0)
        x = np.asarray(x, dtype=np.float64).reshape(1, -1) if not hasattr(x, "columns") else x
        Z = self.transform(x)
        if not isinstance(k, numbers.Integral) or not 1 <= k <= m.Z_train.shape[0]:
            raise ValueError(f"k must be in [1, {m.Z_train.shape[0]}], got {k!r}")
        idx = kneighbors(m.Z_train, Z, int(k))[0]
        dist = np.linalg.norm(m.Z_train[idx] - Z[0], axis=1)
        return pd.DataFrame({"train_index": idx, "distance": dist, "y": self.y_train_[idx]})
