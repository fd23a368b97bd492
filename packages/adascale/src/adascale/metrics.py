"""OOD metrics (ID = positive, scores higher for ID), ``evaluate`` and an APS-style ``grid_search``.

FPR@95 is the share of OOD samples scored at or above the highest threshold that keeps 95 % of ID
samples (scikit-learn's ``roc_curve`` read at the first TPR >= 0.95); AUROC counts ties as a half
(Mann-Whitney); AUPR is scikit-learn's average precision, with ID (In) or OOD (Out) positive.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from adascale.base import Data, Detector, batches
from adascale.distributed import gather_rows

METRICS = ("FPR@95", "AUROC", "AUPR-In", "AUPR-Out")


def _as_array(scores: Tensor | np.ndarray | Sequence[float], name: str) -> np.ndarray:
    if isinstance(scores, Tensor):
        scores = scores.detach().cpu().double().numpy()
    a = np.asarray(scores, dtype=np.float64).ravel()
    if a.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} holds NaN or Inf scores ({int((~np.isfinite(a)).sum())} of them)")
    return a


def _roc(id_scores: np.ndarray, ood_scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TPR and FPR at every distinct threshold, from the highest down (ID positive)."""
    scores = np.concatenate([id_scores, ood_scores])
    positive = np.concatenate([np.ones(id_scores.size), np.zeros(ood_scores.size)])
    order = np.argsort(-scores, kind="mergesort")
    scores, positive = scores[order], positive[order]
    last_of_tie = np.r_[np.nonzero(np.diff(scores))[0], scores.size - 1]
    tp = np.cumsum(positive)[last_of_tie]
    fp = np.cumsum(1 - positive)[last_of_tie]
    return tp / id_scores.size, fp / ood_scores.size


def fpr_at_tpr(id_scores: Any, ood_scores: Any, tpr: float = 0.95) -> float:
    """FPR at the first threshold (from the top) whose TPR reaches ``tpr``."""
    if not 0 < tpr <= 1:
        raise ValueError(f"tpr must lie in (0, 1], got {tpr}")
    t, f = _roc(_as_array(id_scores, "id_scores"), _as_array(ood_scores, "ood_scores"))
    return float(f[np.argmax(t >= tpr - 1e-12)])


def auroc(id_scores: Any, ood_scores: Any) -> float:
    """P(ID score > OOD score) + P(tie) / 2."""
    a, b = _as_array(id_scores, "id_scores"), _as_array(ood_scores, "ood_scores")
    t, f = _roc(a, b)
    t, f = np.r_[0, t], np.r_[0, f]
    return float(np.sum(np.diff(f) * (t[1:] + t[:-1]) / 2))


def _average_precision(pos: np.ndarray, neg: np.ndarray) -> float:
    t, f = _roc(pos, neg)
    tp, fp = t * pos.size, f * neg.size
    precision = tp / (tp + fp)
    return float(np.sum(np.diff(np.r_[0, t]) * precision))


def aupr_in(id_scores: Any, ood_scores: Any) -> float:
    """Average precision with ID as the positive class."""
    return _average_precision(
        _as_array(id_scores, "id_scores"), _as_array(ood_scores, "ood_scores")
    )


def aupr_out(id_scores: Any, ood_scores: Any) -> float:
    """Average precision with OOD as the positive class (scores negated)."""
    a, b = _as_array(id_scores, "id_scores"), _as_array(ood_scores, "ood_scores")
    return _average_precision(-b, -a)


def ood_metrics(id_scores: Any, ood_scores: Any) -> dict[str, float]:
    """``{"FPR@95", "AUROC", "AUPR-In", "AUPR-Out"}`` as fractions."""
    return {
        "FPR@95": fpr_at_tpr(id_scores, ood_scores),
        "AUROC": auroc(id_scores, ood_scores),
        "AUPR-In": aupr_in(id_scores, ood_scores),
        "AUPR-Out": aupr_out(id_scores, ood_scores),
    }


def score_all(detector: Detector, data: Data) -> Tensor:
    """``detector.score`` over a loader, all-gathered across ranks under torch.distributed."""
    parts = [detector.score(x).detach() for x in batches(data)]
    if not parts:
        raise ValueError("the data yielded no batch")
    return gather_rows(torch.cat(parts))


def evaluate(
    detector: Detector, id_data: Data, ood_data: Mapping[str, Data]
) -> dict[str, dict[str, float]]:
    """``{ood_name: {metric: value}}`` for each OOD set against the ID set."""
    if not ood_data:
        raise ValueError("ood_data must name at least one OOD set")
    id_scores = score_all(detector, id_data)
    return {name: ood_metrics(id_scores, score_all(detector, d)) for name, d in ood_data.items()}


def grid_search(
    detector: Detector,
    id_val: Data,
    ood_val: Data | Mapping[str, Data],
    grid: Mapping[str, Iterable[Any]],
    *,
    metric: str = "AUROC",
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """OpenOOD's APS mode: pick the grid point best on OOD *validation* data (never test data).

    ``detector`` is fitted already; each grid point sets attributes and re-scores features
    extracted once, so only hyper-parameters that do not change the features may be searched
    (AdaSCALE's ``o``/``eps`` need a new detector). Sets the best point on ``detector`` and
    returns it with every row ``{**point, metric: value}``. Several OOD sets are averaged.
    """
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    keys = list(grid)
    for key in keys:
        if key in detector.input_keys:
            raise ValueError(f"{key!r} changes the features; build one detector per value instead")
        if not hasattr(detector, key):
            raise ValueError(f"{type(detector).__name__} has no hyper-parameter {key!r}")
    oods = ood_val if isinstance(ood_val, Mapping) else {"ood": ood_val}
    id_feats = detector.extract_all(id_val)
    ood_feats = {name: detector.extract_all(d) for name, d in oods.items()}
    sign = -1.0 if metric == "FPR@95" else 1.0
    rows, best, best_value = [], {}, -np.inf
    for values in itertools.product(*(list(grid[k]) for k in keys)):
        point = dict(zip(keys, values, strict=True))
        for k, v in point.items():
            setattr(detector, k, v)
        with torch.no_grad():
            s_id = detector.score_features(*id_feats)
            value = float(
                np.mean(
                    [
                        ood_metrics(s_id, detector.score_features(*f))[metric]
                        for f in ood_feats.values()
                    ]
                )
            )
        rows.append({**point, metric: value})
        if sign * value > best_value:
            best, best_value = point, sign * value
    for k, v in best.items():
        setattr(detector, k, v)
    return best, rows
