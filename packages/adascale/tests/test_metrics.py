"""Metrics against the Gaussian closed forms and scikit-learn; the APS grid search."""

import numpy as np
import pytest
import torch
from adascale import SCALE, AdaSCALE, aupr_in, aupr_out, auroc, evaluate, fpr_at_tpr, grid_search
from scipy.stats import norm


def test_gaussian_closed_forms():
    rng = np.random.default_rng(0)
    mu, n = 1.5, 400_000
    ind, ood = rng.normal(mu, 1, n), rng.normal(0, 1, n)
    assert auroc(ind, ood) == pytest.approx(norm.cdf(mu / np.sqrt(2)), abs=2e-3)
    assert fpr_at_tpr(ind, ood) == pytest.approx(1 - norm.cdf(mu + norm.ppf(0.05)), abs=3e-3)


def test_against_scikit_learn_with_ties():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(1)
    ind = rng.integers(0, 20, 300).astype(float)
    ood = rng.integers(-5, 12, 200).astype(float)
    y = np.r_[np.ones(300), np.zeros(200)]
    s = np.r_[ind, ood]
    assert auroc(ind, ood) == pytest.approx(metrics.roc_auc_score(y, s), abs=1e-12)
    assert aupr_in(ind, ood) == pytest.approx(metrics.average_precision_score(y, s), abs=1e-12)
    assert aupr_out(ind, ood) == pytest.approx(
        metrics.average_precision_score(1 - y, -s), abs=1e-12
    )
    fpr, tpr, _ = metrics.roc_curve(y, s)
    assert fpr_at_tpr(ind, ood) == pytest.approx(fpr[np.argmax(tpr >= 0.95)], abs=1e-12)


def test_perfect_and_reversed_separation():
    assert auroc([2, 3], [0, 1]) == 1.0 and fpr_at_tpr([2, 3], [0, 1]) == 0.0
    assert auroc([0, 1], [2, 3]) == 0.0 and fpr_at_tpr([0, 1], [2, 3]) == 1.0


def test_bad_scores():
    with pytest.raises(ValueError, match="NaN"):
        auroc([1.0, float("nan")], [0.0])
    with pytest.raises(ValueError, match="empty"):
        auroc([], [0.0])


def test_evaluate_and_grid_search(tiny_net, images):
    det = AdaSCALE(tiny_net.features, tiny_net.fc, n_fit=None).fit(images)
    ood = torch.rand(16, 2, 6, 6) * 4
    res = evaluate(det, [images[:16], images[16:]], {"noise": [ood]})
    assert set(res["noise"]) == {"FPR@95", "AUROC", "AUPR-In", "AUPR-Out"}
    assert res["noise"]["AUROC"] == pytest.approx(auroc(det.score(images), det.score(ood)))
    best, rows = grid_search(det, images, ood, {"p_max": [70, 85, 95]}, metric="FPR@95")
    assert len(rows) == 3 and det.p_max == best["p_max"]
    assert rows[[r["p_max"] for r in rows].index(best["p_max"])]["FPR@95"] == min(
        r["FPR@95"] for r in rows
    )
    with pytest.raises(ValueError, match="changes the features"):
        grid_search(det, images, ood, {"eps": [0.1]})
    with pytest.raises(ValueError, match="no hyper-parameter"):
        grid_search(SCALE(tiny_net.features, tiny_net.fc), images, ood, {"p_max": [1]})
