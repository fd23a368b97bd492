"""Routing each subtask to the edge or the cloud: the benefit-cost router and its baselines.

The score is ``s = sigmoid(f(x))`` for ``x = [e; m; r_B; r_L]`` (embedding of question + subtask, 8 meta
features, budget use); the threshold ``delta = clip(delta0 + alpha_B r_B + alpha_L r_L, 0, 1)``
rises as the query spends its token and latency budgets; ``p_cloud = sigmoid((s - delta) / tau)``
and the step goes to the cloud with probability ``p_cloud``. The same features, threshold and squashing
are used by :meth:`UtilityRouter.fit` (the official code uses different ones in training and at
inference; see the README).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import re
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from hybridflow.embedders import Embedder, as_embedder
from hybridflow.plan import DEFAULT_DIFFICULTY, Subtask

Target = Literal["edge", "cloud"]
META_DIM = 8
_DIGITS = re.compile(r"\d")


# -- the maths -----------------------------------------------------------------------------------
def sigmoid(x: float | np.ndarray) -> Any:
    """Numerically stable logistic function."""
    x = np.asarray(x, dtype=np.float64)
    out = np.where(
        x >= 0, 1.0 / (1.0 + np.exp(-np.abs(x))), np.exp(-np.abs(x)) / (1.0 + np.exp(-np.abs(x)))
    )
    return float(out) if out.ndim == 0 else out


def adaptive_threshold(r_b: Any, r_l: Any, delta0: float, alpha_b: float, alpha_l: float) -> Any:
    """``clip(delta0 + alpha_B r_B + alpha_L r_L, 0, 1)``."""
    return np.clip(delta0 + alpha_b * np.asarray(r_b) + alpha_l * np.asarray(r_l), 0.0, 1.0)


def p_cloud(s: Any, delta: Any, tau: float) -> Any:
    """``sigmoid((s - delta) / tau)``: the probability of sending the step to the cloud."""
    if tau <= 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    return sigmoid((np.asarray(s, dtype=np.float64) - np.asarray(delta)) / tau)


def meta_features(question: str, subtask: Subtask, *, is_last: bool) -> np.ndarray:
    """The 8 meta features, one definition for training and routing (all known before the call).

    ``[#deps/4, task words/50, min(words of question+task/100, 1), planner difficulty/9,
    token hint/100, task digits/20, is first step, is last step]``.
    """
    words = len(subtask.task.split())
    total = len(question.split()) + words
    difficulty = DEFAULT_DIFFICULTY if subtask.difficulty is None else subtask.difficulty
    return np.array(
        [
            len(subtask.deps) / 4,
            words / 50,
            min(total / 100, 1.0),
            difficulty / 9,
            (subtask.token_hint or 0) / 100,
            len(_DIGITS.findall(subtask.task)) / 20,
            float(subtask.id == 1),
            float(is_last),
        ],
        dtype=np.float32,
    )


def budget_use(
    tokens_used: float, elapsed_s: float, b_max: float, l_max: float
) -> tuple[float, float]:
    """``(r_B, r_L) = (tokens so far / B_max, seconds since the query began / L_max)``."""
    for name, value in {"tokens_used": tokens_used, "elapsed_s": elapsed_s}.items():
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return tokens_used / b_max, elapsed_s / l_max


@dataclasses.dataclass(frozen=True)
class RouteDecision:
    """Where a step goes and why: ``rule`` names a hard rule that overrode the draw (or None)."""

    target: Target
    p_cloud: float
    s: float = math.nan
    delta: float = math.nan
    rule: str | None = None


class StepRouter(Protocol):
    def route(
        self,
        question: str,
        subtask: Subtask,
        *,
        tokens_used: float,
        elapsed_s: float,
        is_last: bool = False,
    ) -> RouteDecision: ...


def _step_rng(seed: int | None, question: str, step_id: int) -> np.random.Generator:
    # One stream per (seed, query, step): the draw does not depend on dispatch order or timing.
    return np.random.default_rng(
        [seed if seed is not None else 0, zlib.crc32(question.encode()), step_id]
    )


def _positive(name: str, value: float) -> float:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def _hard_rule(subtask: Subtask, is_last: bool, enabled: bool) -> str | None:
    if not enabled:
        return None
    if subtask.id == 1:
        return "first"
    return "last" if is_last else None


# -- the MLP (numpy, the same layout as the official torch RouterNet) -------------------------------------------------
def mlp_forward(layers: Sequence[tuple[np.ndarray, np.ndarray]], x: np.ndarray) -> np.ndarray:
    """ReLU MLP: ``x @ W.T + b`` per layer, ReLU between layers, raw output (no squashing)."""
    h = x
    for i, (w, b) in enumerate(layers):
        h = h @ w.T + b
        if i < len(layers) - 1:
            h = np.maximum(h, 0.0)
    return h[..., 0]


def init_mlp(
    d_in: int, hidden: int, depth: int, rng: np.random.Generator
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Kaiming-uniform-like init, as ``torch.nn.Linear`` does (bound 1/sqrt(fan_in))."""
    sizes = [d_in, *([hidden] * depth), 1]
    layers = []
    for fan_in, fan_out in itertools.pairwise(sizes):
        bound = 1 / math.sqrt(fan_in)
        layers.append(
            (
                rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32),
                rng.uniform(-bound, bound, fan_out).astype(np.float32),
            )
        )
    return layers


class UtilityRouter:
    """The learned benefit-cost router of HybridFlow.

    ``b_max`` (tokens) and ``l_max`` (seconds) are the per-query budgets the threshold reads; ``seed``
    fixes the Bernoulli draws (one stream per query and step). Step 1 and the last step go to the cloud
    when ``force_cloud_first_last``. Call :meth:`fit` on profiles or :meth:`load` a checkpoint first.
    """

    def __init__(
        self,
        embedder: Embedder | Callable[[Sequence[str]], Any] | str | None = None,
        *,
        b_max: float = 2048.0,
        l_max: float = 25.0,
        delta0: float = 0.0,
        alpha_b: float = 0.5,
        alpha_l: float = 0.5,
        tau: float = 0.1,
        hidden: int = 256,
        depth: int = 2,
        force_cloud_first_last: bool = True,
        seed: int | None = 0,
    ) -> None:
        self.embedder = as_embedder(embedder)
        self.b_max = _positive("b_max", b_max)
        self.l_max = _positive("l_max", l_max)
        self.tau = _positive("tau", tau)
        for name, value in {"delta0": delta0, "alpha_b": alpha_b, "alpha_l": alpha_l}.items():
            if not (isinstance(value, (int, float)) and math.isfinite(value)):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        self.delta0, self.alpha_b, self.alpha_l = float(delta0), float(alpha_b), float(alpha_l)
        if hidden < 1 or depth < 1:
            raise ValueError(f"hidden and depth must be >= 1, got {hidden} and {depth}")
        self.hidden, self.depth = hidden, depth
        self.force_cloud_first_last = force_cloud_first_last
        self.seed = seed
        self.layers_: list[tuple[np.ndarray, np.ndarray]] | None = None
        self.history_: list[float] = []

    @property
    def d_in(self) -> int:
        return self.embedder.dim + META_DIM + 2

    def features(
        self,
        questions: Sequence[str],
        subtasks: Sequence[Subtask],
        is_last: Sequence[bool],
        r_b: Any,
        r_l: Any,
    ) -> np.ndarray:
        """``[e; m; r_B; r_L]`` rows for a batch of steps."""
        texts = [q + " " + s.task for q, s in zip(questions, subtasks, strict=False)]
        emb = np.asarray(self.embedder(texts), dtype=np.float32)
        if emb.shape != (len(texts), self.embedder.dim):
            raise ValueError(
                f"embedder returned shape {emb.shape}, expected ({len(texts)}, {self.embedder.dim})"
            )
        if not np.isfinite(emb).all():
            # A RuntimeError: the pipeline's official rule sends a step the router cannot score to
            # the cloud (flagged); a NaN score would otherwise lose every draw and go to the edge.
            raise RuntimeError(f"embedder returned non-finite values for {texts[0][:60]!r}")
        meta = np.stack(
            [
                meta_features(q, s, is_last=last)
                for q, s, last in zip(questions, subtasks, is_last, strict=False)
            ]
        )
        rb = np.broadcast_to(np.asarray(r_b, dtype=np.float32), (len(texts),))[:, None]
        rl = np.broadcast_to(np.asarray(r_l, dtype=np.float32), (len(texts),))[:, None]
        return np.concatenate([emb, meta, rb, rl], axis=1)

    def _layers(self) -> list[tuple[np.ndarray, np.ndarray]]:
        if self.layers_ is None:
            raise RuntimeError(
                "UtilityRouter is not fitted: call fit(profiles) or UtilityRouter.load(path)"
            )
        return self.layers_

    def score(
        self,
        question: str,
        subtask: Subtask,
        *,
        is_last: bool = False,
        r_b: float = 0.0,
        r_l: float = 0.0,
    ) -> float:
        """``s = sigmoid(f(x))`` in (0, 1); above 0.5 means a positive predicted utility of the cloud."""
        x = self.features([question], [subtask], [is_last], r_b, r_l)
        return float(sigmoid(mlp_forward(self._layers(), x))[0])

    def route(
        self,
        question: str,
        subtask: Subtask,
        *,
        tokens_used: float,
        elapsed_s: float,
        is_last: bool = False,
    ) -> RouteDecision:
        r_b, r_l = budget_use(tokens_used, elapsed_s, self.b_max, self.l_max)
        s = self.score(question, subtask, is_last=is_last, r_b=r_b, r_l=r_l)
        delta = float(adaptive_threshold(r_b, r_l, self.delta0, self.alpha_b, self.alpha_l))
        p = float(p_cloud(s, delta, self.tau))
        rule = _hard_rule(subtask, is_last, self.force_cloud_first_last)
        if rule is not None:  # p_cloud 1, as the baselines report for a hard-rule step
            return RouteDecision("cloud", 1.0, s, delta, rule)
        draw = _step_rng(self.seed, question, subtask.id).random()
        return RouteDecision("cloud" if draw < p else "edge", p, s, delta)

    def fit(self, profiles: Sequence[Any], **train_kw: Any) -> UtilityRouter:
        """Train on subtask profiles (Huber on the utility label plus budget penalties); see
        :func:`hybridflow.training.fit_router` for the options."""
        from hybridflow.training import fit_router

        fit_router(self, profiles, **train_kw)
        return self

    # -- checkpoints -------------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        return {
            "b_max": self.b_max,
            "l_max": self.l_max,
            "delta0": self.delta0,
            "alpha_b": self.alpha_b,
            "alpha_l": self.alpha_l,
            "tau": self.tau,
            "hidden": self.hidden,
            "depth": self.depth,
            "force_cloud_first_last": self.force_cloud_first_last,
            "seed": self.seed,
        }

    def save(self, path: str | Path) -> Path:
        """Write weights and settings to one ``.npz`` (loads without torch)."""
        layers = self._layers()
        arrays = {f"w{i}": w for i, (w, _) in enumerate(layers)} | {
            f"b{i}": b for i, (_, b) in enumerate(layers)
        }
        meta = {
            "config": self.config(),
            "embed_dim": self.embedder.dim,
            "embedder": getattr(self.embedder, "name", ""),
        }
        path = Path(path)
        with path.open("wb") as fh:
            np.savez(fh, meta=np.array(json.dumps(meta)), **arrays)  # type: ignore[arg-type]
        return path

    @classmethod
    def load(
        cls,
        path: str | Path,
        embedder: Embedder | Callable[[Sequence[str]], Any] | str | None = None,
        **overrides: Any,
    ) -> UtilityRouter:
        """Load a checkpoint; ``overrides`` replace saved settings (e.g. another ``b_max``)."""
        with np.load(Path(path), allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            n = sum(1 for k in data.files if k.startswith("w"))
            layers = [(data[f"w{i}"], data[f"b{i}"]) for i in range(n)]
        router = cls(embedder, **(meta["config"] | overrides))
        if router.embedder.dim != meta["embed_dim"]:
            raise ValueError(
                f"checkpoint {path} was trained with {meta['embed_dim']}-d embeddings "
                f"({meta['embedder'] or 'unnamed'}), but the embedder gives {router.embedder.dim}-d"
            )
        if layers[0][0].shape[1] != router.d_in:
            raise ValueError(
                f"checkpoint input width {layers[0][0].shape[1]} != {router.d_in} expected"
            )
        router.layers_ = layers
        return router


# -- baselines under the same API ----------------------------------------------------------------
class _RuleRouter:
    """A baseline: the hard rules first (when enabled), then the subclass's ``_decide``."""

    force_cloud_first_last: bool

    def route(
        self,
        question: str,
        subtask: Subtask,
        *,
        tokens_used: float,
        elapsed_s: float,
        is_last: bool = False,
    ) -> RouteDecision:
        rule = _hard_rule(subtask, is_last, self.force_cloud_first_last)
        if rule is not None:
            return RouteDecision("cloud", 1.0, rule=rule)
        return self._decide(question, subtask)

    def _decide(self, question: str, subtask: Subtask) -> RouteDecision:
        raise NotImplementedError


class ConstantRouter(_RuleRouter):
    """Every step to one target (``edge``-only / ``cloud``-only arms); no hard rules by default."""

    def __init__(self, target: Target, *, force_cloud_first_last: bool = False) -> None:
        if target not in ("edge", "cloud"):
            raise ValueError(f"target must be 'edge' or 'cloud', got {target!r}")
        self.target: Target = target
        self.force_cloud_first_last = force_cloud_first_last

    def _decide(self, question: str, subtask: Subtask) -> RouteDecision:
        return RouteDecision(self.target, float(self.target == "cloud"))


class ThresholdRouter(_RuleRouter):
    """The official fixed threshold: cloud iff the planner's Difficulty >= ``threshold``."""

    def __init__(self, threshold: int = 5, *, force_cloud_first_last: bool = True) -> None:
        if isinstance(threshold, bool) or not isinstance(threshold, (int, np.integer)):
            raise TypeError(f"threshold must be an int in 1..10, got {threshold!r}")
        if not 1 <= threshold <= 10:
            raise ValueError(f"threshold must be in 1..10 (10 = never cloud), got {threshold}")
        self.threshold = threshold
        self.force_cloud_first_last = force_cloud_first_last

    def _decide(self, question: str, subtask: Subtask) -> RouteDecision:
        difficulty = DEFAULT_DIFFICULTY if subtask.difficulty is None else subtask.difficulty
        cloud = difficulty >= self.threshold
        return RouteDecision("cloud" if cloud else "edge", float(cloud))


class RandomRouter(_RuleRouter):
    """Cloud with a fixed probability, seeded per (query, step): the negative control."""

    def __init__(
        self, p: float = 0.5, *, seed: int | None = 0, force_cloud_first_last: bool = True
    ) -> None:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p must be in [0, 1], got {p}")
        self.p, self.seed, self.force_cloud_first_last = p, seed, force_cloud_first_last

    def _decide(self, question: str, subtask: Subtask) -> RouteDecision:
        draw = _step_rng(self.seed, question, subtask.id).random()
        return RouteDecision("cloud" if draw < self.p else "edge", self.p)


class QueryRouter:
    """A RouteLLM-style query-level router: the whole query goes to one model, no plan.

    A ridge regression from the query embedding to a "the strong model wins" label gives a score; the
    threshold is calibrated so that a given fraction of calibration queries goes to the cloud
    (RouteLLM's ``calibrate_threshold --strong-model-pct``). The model string ``router-<name>-<t>``
    of RouteLLM maps to ``QueryRouter(...).with_threshold(t)``.
    """

    def __init__(
        self,
        embedder: Embedder | Callable[[Sequence[str]], Any] | str | None = None,
        *,
        ridge: float = 1.0,
    ) -> None:
        self.embedder = as_embedder(embedder)
        self.ridge = _positive("ridge", ridge)
        self.coef_: np.ndarray | None = None
        self.threshold_: float = 0.5

    def _design(self, queries: Sequence[str]) -> np.ndarray:
        emb = np.asarray(self.embedder(list(queries)), dtype=np.float64)
        return np.concatenate([emb, np.ones((len(queries), 1))], axis=1)

    def fit(self, queries: Sequence[str], strong_wins: Sequence[float]) -> QueryRouter:
        """Least squares (ridge) of the label (1: the cloud is right and the edge wrong) on embeddings."""
        y = np.asarray(strong_wins, dtype=np.float64)
        if len(queries) != len(y) or len(y) == 0:
            raise ValueError(
                f"need as many labels as queries (>0), got {len(y)} labels for {len(queries)} queries"
            )
        x = self._design(queries)
        self.coef_ = np.linalg.solve(x.T @ x + self.ridge * np.eye(x.shape[1]), x.T @ y)
        return self

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        if self.coef_ is None:
            raise RuntimeError("QueryRouter is not fitted: call fit(queries, labels)")
        return self._design(queries) @ self.coef_

    def calibrate(self, queries: Sequence[str], cloud_fraction: float) -> QueryRouter:
        """Set the threshold so that ``cloud_fraction`` of ``queries`` score at or above it."""
        if not 0.0 <= cloud_fraction <= 1.0:
            raise ValueError(f"cloud_fraction must be in [0, 1], got {cloud_fraction}")
        s = np.sort(self.scores(queries))
        k = round((1 - cloud_fraction) * len(s))
        self.threshold_ = float(s[k]) if k < len(s) else float(s[-1]) + 1.0
        return self

    def with_threshold(self, threshold: float) -> QueryRouter:
        self.threshold_ = float(threshold)
        return self

    def route_query(self, query: str) -> Target:
        return "cloud" if float(self.scores([query])[0]) >= self.threshold_ else "edge"
