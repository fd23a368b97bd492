import numpy as np
import pytest
from ssn_lateral import metrics


def test_treves_rolls_closed_cases():
    assert metrics.treves_rolls(np.full((1, 10), 3.0))[0] == pytest.approx(1.0)
    assert metrics.treves_rolls(np.eye(10)[:1] * 5)[0] == pytest.approx(0.1)
    half = np.r_[np.ones(5), np.zeros(5)][None]
    assert metrics.treves_rolls(half)[0] == pytest.approx(0.5)
    assert np.isnan(metrics.treves_rolls(np.zeros((1, 4)))[0])


def test_active_fraction_absolute_and_relative():
    r = np.array([[0.0, 0.01, 0.5, 1.0], [2.0, 2.0, 0.0, 0.11]])
    np.testing.assert_allclose(metrics.active_fraction(r, 0.1), [0.5, 0.75])
    np.testing.assert_allclose(metrics.active_fraction(r, relative=0.05), [0.5, 0.75])
    assert metrics.active_fraction(np.zeros((1, 3)), relative=0.05)[0] == 0
    with pytest.raises(ValueError, match="exactly one"):
        metrics.active_fraction(r)
    with pytest.raises(ValueError, match="exactly one"):
        metrics.active_fraction(r, 0.1, relative=0.1)


def test_participation_ratio_isotropic_and_rank_one():
    rng = np.random.default_rng(0)
    iso = rng.standard_normal((200000, 8))
    assert metrics.participation_ratio(iso) == pytest.approx(8.0, rel=0.01)
    rank_one = rng.standard_normal((500, 1)) * np.arange(1, 9)
    assert metrics.participation_ratio(rank_one) == pytest.approx(1.0, rel=1e-6)


def test_cost_and_readouts():
    r = np.array([[1.0, -2.0, 0.5]])
    assert metrics.cost(r)[0] == pytest.approx(3.5)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 5))
    M = rng.standard_normal((5, 12))
    codes = X @ M
    assert metrics.reconstruction_r2(codes, X, codes, X) == pytest.approx(1.0, abs=1e-4)
    # halving the code halves the decoded patch: R^2 = 1 - 0.25 for unit-variance patches
    assert metrics.reconstruction_r2(codes, X, 0.5 * codes, X) == pytest.approx(0.75, abs=0.03)
    y = (X[:, 0] > 0).astype(int)
    assert metrics.texture_accuracy(codes, y, codes, y) > 0.95
    with pytest.raises(ValueError, match="NaN"):
        metrics.cost(np.array([[np.nan]]))
