import math

import numpy as np
import pytest
from adalina import SemiValue, kernel_size_distribution, paper_semivalues, sampling_distribution
from adalina.exact import linear_coefficients
from adalina.sampling import (
    draw_coalitions,
    sample_vector_coefficients,
    sample_vectors,
    size_support,
)
from scipy.special import comb


@pytest.mark.parametrize("sv", [SemiValue.shapley(), *paper_semivalues()], ids=str)
@pytest.mark.parametrize("include_extremes", [False, True])
def test_sample_vectors_have_constant_norm(sv, include_extremes):
    n = 11
    q = sampling_distribution(n, sv, include_extremes=include_extremes)
    inside, outside = sample_vector_coefficients(n, sv, q, include_extremes=include_extremes)
    masks = draw_coalitions(np.random.default_rng(0), 400, n, q, size_support(n, include_extremes))
    norms = np.linalg.norm(sample_vectors(masks, inside, outside), axis=1)
    # ||a(S)|| = n Z, Z = sum over sizes of sqrt(w_{s-1}^2/s + w_s^2/(n-s))
    w = sv.weights(n)
    z = 0.0
    for s in size_support(n, include_extremes):
        term = (w[s - 1] ** 2 / s if s >= 1 else 0.0) + (w[s] ** 2 / (n - s) if s < n else 0.0)
        z += math.sqrt(term)
    np.testing.assert_allclose(norms, n * z, rtol=1e-12)


def test_sample_vectors_reweight_the_linear_form():
    # a(S) P(S) = c(S): the sample vector is the linear coefficient over the probability of S
    n, sv = 7, SemiValue.beta_shapley(4, 1)
    q = sampling_distribution(n, sv)
    inside, outside = sample_vector_coefficients(n, sv, q)
    c_in, c_out = linear_coefficients(n, sv)
    s = np.arange(1, n)
    prob = q / comb(n, s)
    np.testing.assert_allclose(inside[s] * prob, c_in[s], rtol=1e-12)
    np.testing.assert_allclose(outside[s] * prob, c_out[s], rtol=1e-12)


def test_shapley_sampling_is_geomean():
    n = 30
    s = np.arange(1, n)
    expected = 1 / np.sqrt(s * (n - s))
    np.testing.assert_allclose(sampling_distribution(n, "shapley"), expected / expected.sum())
    kernel = 1 / (s * (n - s))
    np.testing.assert_allclose(kernel_size_distribution(n), kernel / kernel.sum())


def test_drawn_sizes_follow_q_and_sets_are_uniform():
    n, m = 6, 60000
    q = sampling_distribution(n, 0.3)
    masks = draw_coalitions(np.random.default_rng(1), m, n, q, size_support(n))
    freq = np.bincount(masks.sum(axis=1), minlength=n + 1)[1:n] / m
    np.testing.assert_allclose(freq, q, atol=4 * np.sqrt(q * (1 - q) / m).max())
    # given the size, each player is in with probability s/n
    size3 = masks[masks.sum(axis=1) == 3]
    np.testing.assert_allclose(size3.mean(axis=0), 0.5, atol=0.03)


def test_stream_does_not_depend_on_batch_cuts():
    n, q = 9, sampling_distribution(9, "shapley")
    one = draw_coalitions(np.random.default_rng(5), 100, n, q, size_support(n))
    rng = np.random.default_rng(5)
    parts = [draw_coalitions(rng, k, n, q, size_support(n)) for k in (7, 50, 43)]
    np.testing.assert_array_equal(one, np.concatenate(parts))


def test_large_n_sampling_is_finite():
    q = sampling_distribution(3000, 0.5)
    inside, outside = sample_vector_coefficients(3000, 0.5, q)
    assert math.isclose(q.sum(), 1.0, rel_tol=1e-12)
    assert np.all(np.isfinite(inside)) and np.all(np.isfinite(outside))
