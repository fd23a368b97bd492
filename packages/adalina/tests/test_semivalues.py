import math

import numpy as np
import pytest
from adalina import SemiValue, paper_semivalues
from scipy.special import beta as beta_fn
from scipy.special import comb

ALL = [SemiValue.shapley(), *paper_semivalues(), SemiValue.beta_shapley(0.5, 0.25)]


@pytest.mark.parametrize("sv", ALL, ids=str)
def test_weights_sum_to_one(sv):
    for n in (2, 3, 10, 57, 500):
        w = sv.weights(n)
        assert w.shape == (n,)
        assert np.all(w >= 0)
        assert math.isclose(w.sum(), 1.0, rel_tol=1e-12), n


def test_shapley_weights_are_uniform():
    np.testing.assert_allclose(SemiValue.shapley().weights(13), np.full(13, 1 / 13), rtol=1e-14)
    # Beta(1, 1) is the Shapley value, through the Beta formula too
    np.testing.assert_allclose(
        SemiValue("beta", alpha=1.0, beta=1.0).weights(13), np.full(13, 1 / 13), rtol=1e-12
    )


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_banzhaf_weights_closed_form(p):
    n = 12
    k = np.arange(n)
    expected = comb(n - 1, k) * p**k * (1 - p) ** (n - 1 - k)
    np.testing.assert_allclose(SemiValue.banzhaf(p).weights(n), expected, rtol=1e-12)


@pytest.mark.parametrize(("alpha", "beta"), [(16, 1), (4, 1), (1, 4), (2, 2), (4, 16), (0.5, 3)])
def test_beta_weights_closed_form(alpha, beta):
    n = 11
    k = np.arange(n)
    expected = comb(n - 1, k) * beta_fn(k + beta, n - 1 - k + alpha) / beta_fn(beta, alpha)
    np.testing.assert_allclose(SemiValue.beta_shapley(alpha, beta).weights(n), expected, rtol=1e-11)


def test_beta_16_1_favours_small_coalitions():
    w = SemiValue.beta_shapley(16, 1).weights(20)
    assert np.all(np.diff(w) < 0)


def test_weights_exact_in_the_thousands():
    # direct binomials overflow here; log space keeps the sum exact
    for sv in (SemiValue.banzhaf(0.3), SemiValue.beta_shapley(16, 4)):
        w = sv.weights(5000)
        assert np.all(np.isfinite(w))
        assert math.isclose(w.sum(), 1.0, rel_tol=1e-10)


def test_symmetry_flag_matches_weights():
    for sv in ALL:
        w = sv.weights(9)
        assert sv.is_symmetric == bool(np.allclose(w, w[::-1], rtol=1e-12)), sv


def test_coerce_shorthands():
    assert SemiValue.coerce("shapley") == SemiValue.shapley()
    assert SemiValue.coerce("Banzhaf") == SemiValue.banzhaf(0.5)
    assert SemiValue.coerce(0.3) == SemiValue.banzhaf(0.3)
    assert SemiValue.coerce((1, 1)) == SemiValue.shapley()
    assert SemiValue.coerce((16, 1)) == SemiValue.beta_shapley(16, 1)
    assert len(paper_semivalues()) == 18


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: SemiValue.banzhaf(0.0), "0 < p < 1"),
        (lambda: SemiValue.banzhaf(1.5), "0 < p < 1"),
        (lambda: SemiValue.beta_shapley(0, 1), "alpha > 0"),
        (lambda: SemiValue.beta_shapley(1, -2), "beta > 0"),
        (lambda: SemiValue.coerce("owen"), "unknown semi-value 'owen'"),
        (lambda: SemiValue.coerce(1.0), "0 < p < 1"),
        (lambda: SemiValue.shapley().weights(1), "n must be >= 2"),
    ],
)
def test_bad_semivalue_parameters(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_bad_semivalue_type():
    with pytest.raises(TypeError, match="cannot read a semi-value"):
        SemiValue.coerce({"p": 0.5})
