"""Noise laws against closed forms and scipy; the Hill estimator; bad parameters."""

import math

import numpy as np
import pytest
import torch
from adagrad_heavytail import noise as N
from adagrad_heavytail import tail
from scipy import integrate, special, stats


def rng(seed=0):
    return np.random.default_rng(seed)


def test_student_t_moment_matches_the_closed_form_and_scipy():
    nu, p, scale = 3.5, 1.7, 2.0
    law = N.StudentT(nu, scale)
    closed = (
        nu ** (p / 2)
        * special.gamma((p + 1) / 2)
        * special.gamma((nu - p) / 2)
        / (math.sqrt(math.pi) * special.gamma(nu / 2))
    )
    assert law.pth_moment(p) == pytest.approx(scale**p * closed, rel=1e-12)
    numeric = 2 * integrate.quad(lambda x: x**p * stats.t.pdf(x, nu, scale=scale), 0, np.inf)[0]
    assert law.pth_moment(p) == pytest.approx(numeric, rel=1e-6)
    assert law.pth_moment(3.5) == math.inf and law.tail_index == 3.5


def test_pareto_spike_gaussian_moments():
    assert N.SymmetricPareto(2.5, xm=1.5).pth_moment(1.2) == pytest.approx(2.5 * 1.5**1.2 / 1.3)
    assert N.SymmetricPareto(1.5).pth_moment(1.5) == math.inf
    assert N.SpikeNoise(M=10.0, q=0.01).pth_moment(1.5) == pytest.approx(0.01 * 10**1.5)
    assert N.Gaussian(2.0).pth_moment(2) == pytest.approx(4.0)
    assert N.Gaussian(1.0).pth_moment(1) == pytest.approx(math.sqrt(2 / math.pi))


@pytest.mark.parametrize("alpha,p", [(1.5, 0.7), (1.8, 1.3), (1.2, 0.5)])
def test_stable_moment_matches_numerical_integration_of_scipy_pdf(alpha, p):
    law = N.SymmetricStable(alpha, scale=1.3)
    # E|X|^p from the characteristic function: E|X|^p = (2/π) Γ(p+1) sin(πp/2) ∫ (1-Re φ(t)) t^{-p-1} dt
    c = 2 / math.pi * special.gamma(p + 1) * math.sin(math.pi * p / 2)
    f = lambda t: (1 - math.exp(-((1.3 * t) ** alpha))) * t ** (-p - 1)  # noqa: E731
    numeric = c * (
        integrate.quad(f, 0, 1, limit=200)[0] + integrate.quad(f, 1, np.inf, limit=200)[0]
    )
    assert law.pth_moment(p) == pytest.approx(numeric, rel=1e-6)
    assert law.pth_moment(alpha) == math.inf


@pytest.mark.parametrize(
    "law", [N.StudentT(3.0), N.SymmetricPareto(3.0), N.SpikeNoise(5.0, 0.1), N.Gaussian(1.5)]
)
def test_sample_moments_match_pth_moment(law):
    x = law.sample(400_000, rng(1))
    p = 1.0
    assert np.mean(np.abs(x) ** p) == pytest.approx(law.pth_moment(p), rel=0.02)
    assert abs(x.mean()) < 0.02 * law.pth_moment(1.0) * 5


@pytest.mark.parametrize("alpha", [1.1, 1.5, 1.9])
def test_stable_sampler_passes_ks_against_scipy(alpha):
    x = N.SymmetricStable(alpha, scale=0.7).sample(400, rng(2))
    result = stats.kstest(x, stats.levy_stable(alpha, 0.0, scale=0.7).cdf)
    assert result.pvalue > 0.01


def test_stable_sampler_detects_a_wrong_scale():
    # the KS test above can fail: a sampler off by 30 % in scale is rejected
    x = 1.3 * N.SymmetricStable(1.5).sample(800, rng(3))
    assert stats.kstest(x, stats.levy_stable(1.5, 0.0).cdf).pvalue < 1e-3


def test_stable_limits_gaussian_and_cauchy():
    x2 = N.SymmetricStable(2.0, scale=1.5).sample(200_000, rng(4))
    assert x2.var() == pytest.approx(2 * 1.5**2, rel=0.02)
    assert stats.kstest(x2[:5000], stats.norm(scale=math.sqrt(2) * 1.5).cdf).pvalue > 0.01
    x1 = N.SymmetricStable(1.0, scale=0.5, allow_infinite_mean=True).sample(5000, rng(5))
    assert stats.kstest(x1, stats.cauchy(scale=0.5).cdf).pvalue > 0.01
    assert N.SymmetricStable(2.0).pth_moment(2) == pytest.approx(2.0)


@pytest.mark.parametrize("law", [N.SymmetricStable(1.5), N.StudentT(1.8), N.SymmetricPareto(1.6)])
def test_heavy_laws_have_means_near_zero(law):
    x = law.sample(1_000_000, rng(6))
    assert abs(np.mean(x > 0) - 0.5) < 0.002  # symmetric
    assert abs(x.mean()) < 0.1  # a tail index < 2 makes the mean noisy, not biased


def test_torch_generator_path_is_reproducible_and_typed():
    law = N.StudentT(2.5)
    a = law.sample((3, 4), torch.Generator().manual_seed(0))
    b = law.sample((3, 4), torch.Generator().manual_seed(0))
    assert isinstance(a, torch.Tensor) and a.dtype == torch.float64 and torch.equal(a, b)
    assert (
        law.sample(5, torch.Generator().manual_seed(0), dtype=torch.float32).dtype == torch.float32
    )
    with pytest.raises(TypeError, match="Generator"):
        law.sample(3, 42)


def test_to_sigma_and_spike_for():
    assert N.to_sigma(N.Gaussian(2.0), 2) == pytest.approx(2.0)
    assert N.to_sigma(N.StudentT(1.5), 1.5) == math.inf
    s = N.spike_for(sigma=2.0, p=1.5, q=0.01)
    assert s.pth_moment(1.5) == pytest.approx(2.0**1.5)


def test_hill_recovers_the_tail_index_within_ten_percent():
    for nu in (1.5, 3.0):
        x = N.StudentT(nu).sample(100_000, rng(7))
        assert tail.estimate_tail_index(x) == pytest.approx(nu, rel=0.10)
    x = N.SymmetricPareto(1.7).sample(100_000, rng(8))
    assert tail.hill_estimator(x, 1000) == pytest.approx(1.7, rel=0.05)
    # and it tells light tails from heavy ones: a Gaussian's estimate is far above 2
    assert tail.estimate_tail_index(rng(9).standard_normal(100_000)) > 3


def test_minibatch_gradient_noise_of_a_linear_model():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    batches = [(torch.randn(8, 3), torch.randn(8, 1)) for _ in range(5)]
    noise = tail.minibatch_gradient_noise(
        model, lambda m, b: torch.nn.functional.mse_loss(m(b[0]), b[1]), batches
    )
    assert noise.shape == (5, 4)
    np.testing.assert_allclose(noise.mean(0), 0, atol=1e-12)
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize(
    "make,match",
    [
        (lambda: N.StudentT(1.0), "finite mean"),
        (lambda: N.SymmetricStable(0.9), "finite mean"),
        (lambda: N.SymmetricPareto(0.8), "finite mean"),
        (lambda: N.SymmetricStable(2.5), r"\(0, 2\]"),
        (lambda: N.SymmetricStable(0.0), r"\(0, 2\]"),
        (lambda: N.SymmetricStable(1.5, beta=0.5), "symmetric"),
        (lambda: N.StudentT(3, scale=-1), "scale"),
        (lambda: N.SpikeNoise(1.0, 0.0), "q"),
        (lambda: N.Gaussian(float("nan")), "scale"),
    ],
)
def test_bad_noise_parameters(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_infinite_mean_laws_on_request():
    assert N.StudentT(0.8, allow_infinite_mean=True).pth_moment(1.0) == math.inf


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: tail.hill_estimator(np.ones(10), 0), "k must"),
        (lambda: tail.hill_estimator(np.arange(10.0), 10), "k must"),
        (lambda: tail.estimate_tail_index(np.array([])), "empty"),
        (lambda: tail.estimate_tail_index(np.array([1.0, np.nan] * 20)), "NaN"),
        (lambda: tail.estimate_tail_index(np.ones(5)), "20 samples"),
    ],
)
def test_bad_tail_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
