"""Instances in the spirit of the algorithm-dependent lower bound (App. B). RECONSTRUCTED.

The paper's lower bound says that for d = 1 and any γ there are an L-smooth f and an oracle with
which AdaGrad needs

    T ≳ (Δ²/γ² + γ²L² ln²(γL/ε)) / ε²  +  (…)·σ^{p/(p-1)} / ε^{(3p-2)/(p-1)}

steps to make |f′(x_t)| ≤ ε. Its instances are not public; these three reproduce the shape of each
term (our construction, labelled as such in the README):

1. :func:`ramp_instance` (the Δ²/γ² term): slope exactly -ε on a ramp of height Δ, then a smooth cap
   (f′ rises to 0 over a width ε/L) and a flat floor; deterministic oracle. AdaGrad's steps are then
   exactly γ/√t, so it reaches the floor after about T = (Δ/(2γε))² steps.
2. :func:`overshoot_instance` (the γ²L² term): a Huber function, quadratic on a core of radius ε/L
   and of slope ε beyond. The first step has length γ; beyond the core the gradients are ±ε, so the
   steps shrink only as γ/√t and the iterate oscillates across the core for about (γL/ε)² steps.
3. :func:`spike_oracle` (the σ term): ±M with probability q/2 each, q M^p = σ^p; rare spikes inflate
   v_t for good and freeze the step size.

Each instance is a 1-d :class:`~adagrad_heavytail.problems.Problem`; :func:`hitting_time` runs any
harness method on it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from adagrad_heavytail.methods import stepper
from adagrad_heavytail.noise import Noise, SpikeNoise, spike_for
from adagrad_heavytail.problems import Problem


def _positive(**values: float) -> None:
    for name, value in values.items():
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


@dataclass
class Instance(Problem):
    """A 1-d instance: ``grad``, ``value``, start ``x0``, the level ``threshold`` of |f′| to hit."""

    name: str
    gamma: float
    L: float
    threshold: float
    x0: np.ndarray = field(repr=False)
    d: int = 1

    def predicted_hitting_time(self) -> float:
        """The closed-form hitting time of AdaGrad with ``lr=gamma``, ``eps=0``, where one exists."""
        return math.nan


@dataclass
class Ramp(Instance):
    """f′ = -ε for x ≤ D = Δ/ε, rising linearly to 0 on [D, D + ε/L], 0 beyond; x0 = 0."""

    eps: float = 1.0
    Delta: float = 1.0

    @property
    def D(self) -> float:
        return self.Delta / self.eps

    def grad(self, x: np.ndarray) -> np.ndarray:
        width = self.eps / self.L
        return -self.eps * np.clip((self.D + width - x) / width, 0.0, 1.0)

    def value(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)[..., 0]
        width = self.eps / self.L
        end = self.D + width
        before = np.minimum(x, self.D)
        # integral of f′ from 0: the ramp, then the quadratic cap, then flat
        within = np.clip(x, self.D, end) - self.D
        cap = -self.eps * (within - within**2 / (2 * width))
        return self.Delta - self.eps * before + cap

    def predicted_hitting_time(self) -> float:
        # steps are γ/√t: position γ Σ_{t<T} t^{-1/2} ≈ 2γ√T must reach D (+ a width ε/(2L) for the
        # threshold ε/2), so T ≈ (Δ/(2γε))²; the discrete sum's -1.46 offset is a lower-order term
        return (self.Delta / (2 * self.gamma * self.eps)) ** 2


def ramp_instance(gamma: float, L: float, Delta: float, eps: float) -> Ramp:
    """The slow-drift ramp (term Δ²/γ²ε²); the hitting level is |f′| ≤ ε/2."""
    _positive(gamma=gamma, L=L, Delta=Delta, eps=eps)
    return Ramp(
        name="ramp", gamma=gamma, L=L, threshold=eps / 2, x0=np.zeros(1), eps=eps, Delta=Delta
    )


@dataclass
class Overshoot(Instance):
    """Huber: f = (L/2)x² on the core |x| ≤ ε/L, ε|x| - ε²/(2L) beyond (|f′| ≤ ε everywhere).

    AdaGrad's first step has length γ whatever the gradient; beyond the core every gradient is ±ε,
    so v_t grows by ε² a step and the steps shrink only as γ/√t. The iterate oscillates across the
    core until the steps fit in it: about (γL/ε)² steps.
    """

    eps: float = 1.0

    def grad(self, x: np.ndarray) -> np.ndarray:
        return self.L * np.clip(x, -self.eps / self.L, self.eps / self.L)

    def value(self, x: np.ndarray) -> np.ndarray:
        x = np.abs(np.asarray(x)[..., 0])
        a = self.eps / self.L
        return np.where(x <= a, 0.5 * self.L * x**2, self.eps * x - 0.5 * self.eps * a)


def overshoot_instance(gamma: float, L: float, eps: float, x0: float | None = None) -> Overshoot:
    """The overshoot instance (term γ²L² ln²(γL/ε)/ε²); hitting level |f′| ≤ ε/2.

    Starts at the core's edge, ``x0 = ε/L`` (Δ = ε²/(2L)), unless ``x0`` is given, so that only
    the overshoot is measured, not the drift.
    """
    _positive(gamma=gamma, L=L, eps=eps)
    start = eps / L if x0 is None else float(x0)
    return Overshoot(
        name="overshoot", gamma=gamma, L=L, threshold=eps / 2, x0=np.array([start]), eps=eps
    )


def spike_oracle(sigma: float, p: float, q: float) -> SpikeNoise:
    """The spike noise of the σ term: ±M w.p. q/2 each with q M^p = σ^p (``M = σ q^{-1/p}``)."""
    return spike_for(sigma, p, q)


def hitting_time(
    method: str,
    instance: Instance,
    T: int,
    seeds: int = 1,
    *,
    noise: Noise | None = None,
    params: Mapping[str, float] | None = None,
    seed: int = 0,
) -> np.ndarray:
    """First t ≤ T (x_1 = x0 is t = 1) with |f′(x_t)| ≤ ``instance.threshold``, per seed; ``inf``
    where it is never reached. ``params`` default to AdaGrad's ``lr=instance.gamma, eps=0``."""
    if not (isinstance(T, int) and T >= 1):
        raise ValueError(f"T must be an integer >= 1, got {T!r}")
    if not (isinstance(seeds, int) and seeds >= 1):
        raise ValueError(f"seeds must be an integer >= 1, got {seeds!r}")
    settings = dict(params) if params is not None else {"lr": instance.gamma, "eps": 0.0}
    step = stepper(method, settings)
    rng = np.random.default_rng(seed)
    x = np.broadcast_to(instance.x0, (seeds, 1)).copy()
    state = step.init(x)
    hit = np.full(seeds, np.inf)
    chunk = 4096
    for start in range(0, T, chunk):
        n = min(chunk, T - start)
        xi = noise.sample((n, seeds, 1), rng) if noise is not None else np.zeros((n, seeds, 1))
        for i in range(n):
            grad = instance.grad(x)
            newly = (np.abs(grad[:, 0]) <= instance.threshold) & np.isinf(hit)
            hit[newly] = start + i + 1
            if np.all(np.isfinite(hit)):
                return hit
            x, state = step.step(x, grad + xi[i], state)
    return hit


__all__ = [
    "Instance",
    "Overshoot",
    "Ramp",
    "hitting_time",
    "overshoot_instance",
    "ramp_instance",
    "spike_oracle",
]
