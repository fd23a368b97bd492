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
