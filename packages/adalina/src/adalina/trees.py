"""The path-dependent tree game for scikit-learn tree ensembles, vectorised over coalitions.

``U(S)`` is the model's output at ``x`` when the features outside ``S`` are marginalised by the
training-sample proportions stored in the trees (TreeSHAP's ``tree_path_dependent`` semantics, the
utility of the paper's experiments): at a split on a present feature follow ``x``; on an absent one,
take both children weighted by ``weighted_n_node_samples``. A batch costs ``O(nodes x batch)`` time
and ``O(depth x batch)`` memory (a depth-first walk that keeps only the pending nodes' vectors).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from adalina.games import Game
from adalina.semivalues import SemiValue, SemiValueLike

_SUPPORTED = (
    "DecisionTreeRegressor, DecisionTreeClassifier, ExtraTreeRegressor, ExtraTreeClassifier, "
    "RandomForestRegressor, RandomForestClassifier, ExtraTreesRegressor, ExtraTreesClassifier, "
    "GradientBoostingRegressor, GradientBoostingClassifier"
)


def _leaf_values(estimator: Any, output: int) -> np.ndarray:
    value = estimator.tree_.value  # (nodes, outputs, classes)
    if hasattr(estimator, "classes_") and value.shape[2] > 1:
        proba = value[:, 0, :] / value[:, 0, :].sum(axis=1, keepdims=True)
        return proba[:, output]
    return value[:, output, 0]


def _raw_output(model: Any, x: np.ndarray, output: int) -> float:
    """The model's own output at ``x`` in the units the game uses (for the offset of boosting)."""
    if hasattr(model, "decision_function"):
        raw = np.asarray(model.decision_function(x[None]), dtype=float).reshape(-1)
    else:
        raw = np.asarray(model.predict(x[None]), dtype=float).reshape(-1)
    return float(raw[output if raw.size > 1 else 0])


def path_dependent_values(
    tree: Any, leaf_values: np.ndarray, x: np.ndarray, masks: np.ndarray
) -> np.ndarray:
    """One fitted ``sklearn.tree._tree.Tree``'s path-dependent output for each coalition row.

    A depth-first walk that holds one probability vector per pending node on the current path
    (``O(depth x batch)`` memory, not ``O(nodes x batch)``: a fully grown tree on 20k rows has
    ~40k nodes but depth ~40), and skips a subtree no coalition reaches.
    """
    left, right = tree.children_left, tree.children_right
    feature, threshold = tree.feature, tree.threshold
    weight = tree.weighted_n_node_samples
    present = np.ascontiguousarray(masks.T)  # one contiguous row per feature
    out = np.zeros(masks.shape[0])
    stack: list[tuple[int, np.ndarray]] = [(0, np.ones(masks.shape[0]))]
    while stack:
        node, p = stack.pop()
        while left[node] != -1:
            f = feature[node]
            go_left = x[f] <= threshold[node]
            # present feature: follow x (prob 1 on its side, 0 on the other); absent: both sides,
            # weighted by the training samples that went each way
            share = weight[left[node]] / weight[node]
            to_left = np.where(present[f], 1.0 if go_left else 0.0, share)
            p_left, p_right = p * to_left, p * (1.0 - to_left)
            near, far = (left[node], right[node]) if go_left else (right[node], left[node])
            p_near, p_far = (p_left, p_right) if go_left else (p_right, p_left)
            if p_far.any():
                stack.append((far, p_far))
            node, p = near, p_near
        out += p * leaf_values[node]
    return out


class TreeGame(Game):
    """Explain one prediction of a scikit-learn tree model (path-dependent feature game).

    ``output`` picks the class for classifiers (a probability for trees and forests, the raw
    score -- log-odds -- for gradient boosting; default: the positive class of a binary model) or
    the target of a multi-output regressor. ``U([n])`` equals the model's output at ``x``.
    """

    def __init__(self, model: Any, x: np.ndarray, *, output: int | None = None) -> None:
        # sklearn compares float32 features with its thresholds
        x = np.asarray(x, dtype=np.float32).astype(float)
        n_features = getattr(model, "n_features_in_", None)
        if n_features is None:
            raise TypeError(
                f"model must be a fitted scikit-learn tree model ({_SUPPORTED}); got "
                f"{type(model).__name__}"
            )
        if x.shape != (n_features,):
            raise ValueError(f"x must have shape ({n_features},), got {x.shape}")
        super().__init__(int(n_features))
        self.model = model
        self.x = x
        self.output = output
        self._trees, self._offset = self._unpack(model)

    def _default_output(self, model: Any) -> int:
        if self.output is not None:
            return int(self.output)
        classes = getattr(model, "classes_", None)
        if classes is not None and len(classes) > 2:
            raise ValueError(
                f"the model has {len(classes)} classes: pass output=<class index> to pick one"
            )
        if classes is not None and "Gradient" not in type(model).__name__:
            return 1  # probability of the positive class
        return 0

    def _unpack(self, model: Any) -> tuple[list[tuple[Any, np.ndarray, float]], float]:
        name = type(model).__name__
        output = self._default_output(model)
        if hasattr(model, "tree_"):
            members, scale = [model], 1.0
        elif name.startswith(("RandomForest", "ExtraTrees")):
            members, scale = list(model.estimators_), 1.0 / len(model.estimators_)
        elif name.startswith("GradientBoosting"):
            column = output if model.estimators_.shape[1] > 1 else 0
            members, scale = list(model.estimators_[:, column]), float(model.learning_rate)
        else:
            raise TypeError(f"unsupported model {name}; TreeGame supports {_SUPPORTED}")
        leaf_output = 0 if name.startswith("GradientBoosting") else output
        trees = [(m.tree_, _leaf_values(m, leaf_output), scale) for m in members]
        offset = 0.0
        if name.startswith("GradientBoosting"):
            # the initial estimator's raw prediction: model output minus the trees' sum at x
            full = self._evaluate(trees, np.ones((1, self.n_players), dtype=bool))[0]
            offset = _raw_output(model, self.x, output) - full
        return trees, offset

    def _evaluate(
        self, trees: list[tuple[Any, np.ndarray, float]], masks: np.ndarray
    ) -> np.ndarray:
        total = np.zeros(masks.shape[0])
        for tree, leaves, scale in trees:
            total += scale * path_dependent_values(tree, leaves, self.x, masks)
        return total

    def value_function(self, masks: np.ndarray) -> np.ndarray:
        # the walk holds depth x chunk floats; chunking the coalitions bounds it for deep trees
        chunk = 1 << 15
        parts = [
            self._evaluate(self._trees, masks[i : i + chunk]) for i in range(0, len(masks), chunk)
        ]
        return self._offset + np.concatenate(parts) if parts else np.zeros(0)


def _log_binom(n: np.ndarray | int, k: np.ndarray | int) -> np.ndarray:
    from math import lgamma

    n_arr, k_arr = np.broadcast_arrays(np.asarray(n, dtype=float), np.asarray(k, dtype=float))
    out = np.full(n_arr.shape, -np.inf)
    ok = (k_arr >= 0) & (k_arr <= n_arr)
    lg = np.vectorize(lgamma)
    if ok.any():
        nn, kk = n_arr[ok], k_arr[ok]
        out[ok] = lg(nn + 1) - lg(kk + 1) - lg(nn - kk + 1)
    return out


def _size_kernels(n: int, weights: np.ndarray, max_d: int) -> list[np.ndarray]:
    """``G_d(j) = sum_k w_k C(n-d, k-j) / C(n-1, k)``, ``j = 0..d-1``, for ``d = 1..max_d``.

    For a leaf whose path tests ``d`` distinct features, ``G_d(j)`` weighs the paths on which ``j``
    of the other ``d - 1`` features are present (a hypergeometric count over coalition sizes).
    """
    k = np.arange(n)
    log_w = np.log(np.maximum(weights, 1e-300)) - _log_binom(n - 1, k)
    kernels = [np.zeros(0)]
    for d in range(1, max_d + 1):
        j = np.arange(d)[:, None]
        terms = log_w[None, :] + _log_binom(n - d, k[None, :] - j)
        kernels.append(np.exp(terms).sum(axis=1))
    return kernels


def _leaf_paths(tree: Any, x: np.ndarray) -> list[tuple[int, dict[int, list[float]]]]:
    """Per leaf: its node and, per feature on its path, ``[a_f, b_f]``: the factor when ``f`` is
    present (follow ``x``: 0 or 1) and when it is absent (the training share of the branch)."""
    left, right = tree.children_left, tree.children_right
    weight = tree.weighted_n_node_samples
    out = []
    stack: list[tuple[int, dict[int, list[float]]]] = [(0, {})]
    while stack:
        node, factors = stack.pop()
        if left[node] == -1:
            out.append((node, factors))
            continue
        f = int(tree.feature[node])
        go_left = x[f] <= tree.threshold[node]
        for child, follows in ((left[node], go_left), (right[node], not go_left)):
            a, b = factors.get(f, [1.0, 1.0])
            child_factors = dict(factors)
            child_factors[f] = [a * float(follows), b * weight[child] / weight[node]]
            stack.append((child, child_factors))
    return out


def _poly_products(a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    """For each ``i``: the coefficients of ``prod_{f != i} (b_f + a_f t)`` (prefix x suffix)."""
    d = a.size
    prefix = [np.ones(1)]
    for f in range(d - 1):
        prefix.append(np.convolve(prefix[-1], [b[f], a[f]]))
    suffix = np.ones(1)
    out: list[np.ndarray] = [np.zeros(0)] * d
    for f in range(d - 1, -1, -1):
        out[f] = np.convolve(prefix[f], suffix)
        suffix = np.convolve(suffix, [b[f], a[f]])
    return out


def exact_tree_semivalue(game: TreeGame, semivalue: SemiValueLike = "shapley") -> np.ndarray:
    """Exact semi-value of a :class:`TreeGame` for any ``n`` (no ``2^n`` enumeration).

    Each leaf's path-dependent weight is a product over the distinct features on its path of
    ``a_f`` (feature present) or ``b_f`` (absent), so its marginal contribution for feature ``i``
    is ``(a_i - b_i)`` times the product over the others; the semi-value averages that product
    over coalition sizes, which depends only on how many of the other path features are present
    (``O(d^2)`` per leaf with ``d`` distinct path features). This is what lets the OpenML script
    check every semi-value above ``n = 20``; it plays the role of the paper's exact tree algorithm
    (which uses Gauss-Legendre quadrature for Beta values) and is checked against enumeration.
    """
    sv = SemiValue.coerce(semivalue)
    n = game.n_players
    weights = sv.weights(n)
    kernels: list[np.ndarray] = [np.zeros(0)]
    phi = np.zeros(n)
    for tree, leaves, scale in game._trees:
        for node, factors in _leaf_paths(tree, game.x):
            features = np.fromiter(factors, dtype=np.int64)
            ab = np.array(list(factors.values()), dtype=float).reshape(-1, 2)
            a, b = ab[:, 0], ab[:, 1]
            d = features.size
            if d == 0:
                continue  # a stump: a constant, worth nothing to any player
            if len(kernels) <= d:
                kernels = _size_kernels(n, weights, max(d, 2 * len(kernels)))
            others = _poly_products(a, b)
            kernel = kernels[d]
            contrib = np.array([others[i] @ kernel for i in range(d)])
            phi[features] += scale * leaves[node] * (a - b) * contrib
    return phi
