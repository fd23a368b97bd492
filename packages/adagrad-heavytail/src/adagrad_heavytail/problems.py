"""Test problems with exact gradients, and the noisy oracle g = ∇f(x) + ξ the theory assumes.

Every problem works on numpy arrays ``x`` of shape ``(..., d)`` (a batch of iterates, one per seed)
and has ``d``, ``L`` (smoothness constant, or the curvature scale where f is not globally smooth),
``x0`` (the start, shape ``(d,)``), ``f_inf`` (inf f, or a lower bound) and ``Delta = f(x0) - f_inf``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from adagrad_heavytail.noise import Noise


def _check_dim(d: int) -> None:
    if not (isinstance(d, (int, np.integer)) and d >= 1):
        raise ValueError(f"dimension d must be an integer >= 1, got {d!r}")


class Problem:
    """Interface: ``value(x)`` and ``grad(x)`` on ``(..., d)`` arrays."""

    d: int
    L: float
    x0: np.ndarray
    f_inf: float = 0.0

    def value(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def grad(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    @property
    def Delta(self) -> float:
        return float(self.value(self.x0)) - self.f_inf


@dataclass
class Quadratic(Problem):
    """f(x) = ½ Σ h_i x_i² with curvatures h_i = L·i/d, i = 1..d (so the largest is L); x0 = 1."""

    d: int = 10
    L: float = 1.0
    x0: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        _check_dim(self.d)
        if not self.L > 0:
            raise ValueError(f"L must be > 0, got {self.L!r}")
        self.h = self.L * np.arange(1, self.d + 1) / self.d
        self.x0 = np.ones(self.d)

    def value(self, x: np.ndarray) -> np.ndarray:
        return 0.5 * (self.h * x * x).sum(-1)

    def grad(self, x: np.ndarray) -> np.ndarray:
        return self.h * x


@dataclass
class BoundedNonconvex(Problem):
    """f(x) = Σ x_i²/(1 + x_i²): nonconvex, 2-smooth, bounded (0 ≤ f < d, Thm 4.2's class); x0 = 1."""

    d: int = 10
    x0: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        _check_dim(self.d)
        self.L = 2.0  # f'' = (2 - 6u²)/(1 + u²)³ peaks at u = 0
        self.x0 = np.ones(self.d)
        self.f_sup = float(self.d)

    def value(self, x: np.ndarray) -> np.ndarray:
        return (x * x / (1 + x * x)).sum(-1)

    def grad(self, x: np.ndarray) -> np.ndarray:
        return 2 * x / (1 + x * x) ** 2


@dataclass
class Rosenbrock(Problem):
    """f(x) = Σ_{i<d} b (x_{i+1} - x_i²)² + (a - x_i)², x0 = 0, minimum 0 at x = a·1.

    Not globally smooth: ``L`` is the largest Hessian eigenvalue at the minimiser.
    """

    d: int = 4
    a: float = 1.0
    b: float = 100.0
    x0: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        _check_dim(self.d)
        if self.d < 2:
            raise ValueError(f"Rosenbrock needs d >= 2, got {self.d}")
        self.x0 = np.zeros(self.d)
        self.L = float(np.linalg.eigvalsh(self.hessian(np.full(self.d, self.a))).max())

    def value(self, x: np.ndarray) -> np.ndarray:
        head, tail = x[..., :-1], x[..., 1:]
        return (self.b * (tail - head**2) ** 2 + (self.a - head) ** 2).sum(-1)

    def grad(self, x: np.ndarray) -> np.ndarray:
        head, tail = x[..., :-1], x[..., 1:]
        inner = tail - head**2
        g = np.zeros_like(x)
        g[..., :-1] = -4 * self.b * head * inner - 2 * (self.a - head)
        g[..., 1:] += 2 * self.b * inner
        return g

    def hessian(self, x: np.ndarray) -> np.ndarray:
        """The exact Hessian at one point ``x`` of shape ``(d,)``."""
        H = np.zeros((self.d, self.d))
        for i in range(self.d - 1):
            H[i, i] += 12 * self.b * x[i] ** 2 - 4 * self.b * x[i + 1] + 2
            H[i + 1, i + 1] += 2 * self.b
            H[i, i + 1] = H[i + 1, i] = -4 * self.b * x[i]
        return H


@dataclass
class LogisticRegression(Problem):
    """f(w) = mean log(1 + exp(-y_i x_iᵀw)) + (l2/2)‖w‖², labels y ∈ {0, 1} or {-1, 1}; w0 = 0.

    ``L = λ_max(XᵀX)/(4n) + l2``; ``f_inf = 0`` is a lower bound, so ``Delta = log 2`` (upper bound).
    """

    X: np.ndarray = field(repr=False)
    y: np.ndarray = field(repr=False)
    l2: float = 0.0

    def __post_init__(self) -> None:
        X = np.asarray(self.X, dtype=np.float64)
        y = np.asarray(self.y)
        if X.ndim != 2 or y.shape != (X.shape[0],):
            raise ValueError(
                f"need X of shape (n, d) and y of shape (n,), got {X.shape} and {y.shape}"
            )
        labels = set(np.unique(y).tolist())
        if not (labels <= {0, 1} or labels <= {-1, 1}):
            raise ValueError(f"labels must be {{0, 1}} or {{-1, 1}}, got {sorted(labels)}")
        if not np.all(np.isfinite(X)):
            raise ValueError("X contains NaN or inf")
        if self.l2 < 0:
            raise ValueError(f"l2 must be >= 0, got {self.l2!r}")
        self.X = X
        self.y = np.where(y > 0, 1.0, -1.0)
        self.d = X.shape[1]
        self.L = float(np.linalg.eigvalsh(X.T @ X).max() / (4 * X.shape[0]) + self.l2)
        self.x0 = np.zeros(self.d)

    @classmethod
    def breast_cancer(cls, l2: float = 1e-3) -> LogisticRegression:
        """scikit-learn's bundled breast-cancer set, standardised, with an intercept column."""
        from sklearn.datasets import load_breast_cancer

        X, y = load_breast_cancer(return_X_y=True)
        X = (X - X.mean(0)) / X.std(0)
        return cls(np.hstack([X, np.ones((X.shape[0], 1))]), y, l2=l2)

    def _margins(self, w: np.ndarray) -> np.ndarray:
        return (w @ self.X.T) * self.y

    def value(self, w: np.ndarray) -> np.ndarray:
        return np.logaddexp(0.0, -self._margins(w)).mean(-1) + 0.5 * self.l2 * (w * w).sum(-1)

    def grad(self, w: np.ndarray) -> np.ndarray:
        weights = -self.y / (1 + np.exp(self._margins(w)))  # -y σ(-margin)
        return weights @ self.X / self.X.shape[0] + self.l2 * w


@dataclass
class NoisyOracle:
    """g = ∇f(x) + ξ with ξ from ``noise``.

    ``coordinatewise=True``: the d coordinates of ξ are i.i.d. draws (the AdaGrad theorem's
    per-coordinate σ). ``False``: ξ = s·u with one scalar draw s and u uniform on the unit sphere, so
    ‖ξ‖ = |s| has the law's tail. ``scale`` multiplies ξ.
    """

    problem: Problem
    noise: Noise
    coordinatewise: bool = True
    scale: float = 1.0

    def __post_init__(self) -> None:
        if not (isinstance(self.noise, Noise)):
            raise TypeError(f"noise must be an adagrad_heavytail.noise law, got {self.noise!r}")
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"scale must be a finite number > 0, got {self.scale!r}")

    def draw(self, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        """Noise vectors of shape ``shape + (d,)``."""
        d = self.problem.d
        if self.coordinatewise:
            return self.scale * self.noise.sample((*shape, d), rng)
        s = self.noise.sample(shape, rng)
        u = rng.standard_normal((*shape, d))
        u /= np.linalg.norm(u, axis=-1, keepdims=True)
        return self.scale * s[..., None] * u

    def __call__(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self.problem.grad(x) + self.draw(x.shape[:-1], rng)

    def vector_scale(self) -> float:
        """A robust size of ξ: √d·median|ξ_i| (coordinatewise) or median|s|: the σ the step rules take.

        The median is finite for every law and is what a user can estimate from samples; p-th
        moments near the tail index blow up (and are infinite at it), which would make every
        σ-scaled step rule vanish (spike noise, whose median is 0, falls back to E|ξ|). Estimated from 2^16 draws of a fixed seed (deterministic).
        """
        draws = self.noise.sample(2**16, np.random.default_rng(0))
        median = float(np.median(np.abs(draws)))
        if median == 0:  # spike noise: mostly zeros; fall back to E|ξ|
            median = self.noise.pth_moment(1.0)
        return self.scale * median * (math.sqrt(self.problem.d) if self.coordinatewise else 1.0)


__all__ = [
    "BoundedNonconvex",
    "LogisticRegression",
    "NoisyOracle",
    "Problem",
    "Quadratic",
    "Rosenbrock",
]
