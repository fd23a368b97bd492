"""Oracles for the pure functions (spec section 6)."""

import math

import numpy as np
import pytest
import torch
from adascale import functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn


def test_scale_factor_hand_values():
    z = torch.tensor([[4.0, 3.0, 2.0, 1.0]])
    assert F.scale_factor(z, 50.0).item() == pytest.approx(10 / 7, rel=1e-6)
    assert F.scale_factor(z, 0.0).item() == 1.0  # k = D keeps everything
    ones = torch.ones(3, 40, dtype=torch.float64)
    # p = 75: k = 40 - round(30) = 10 -> r = 40/10
    assert torch.equal(F.scale_factor(ones, 75.0), torch.full((3,), 4.0, dtype=torch.float64))


def test_scale_factor_rounds_half_to_even_like_numpy():
    d = 10  # p = 25 -> round(2.5) = 2 (even), p = 35 -> round(3.5) = 4
    assert F.kept_count(d, torch.tensor([25.0, 35.0])).tolist() == [d - 2, d - 4]
    assert [d - int(np.round(d * p / 100)) for p in (25, 35)] == [8, 6]


@settings(max_examples=20, deadline=None)
@given(st.integers(20, 64), st.floats(0, 95), st.floats(0, 95), st.integers(0, 10**6))
def test_scale_factor_properties(d, p, q, seed):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(6, d, generator=g, dtype=torch.float64).abs() + 0.01
    lo, hi = sorted((p, q))
    r_lo, r_hi = F.scale_factor(z, lo), F.scale_factor(z, hi)
    assert bool((r_lo >= 1 - 1e-12).all())
    assert bool((r_hi >= r_lo - 1e-12).all())  # monotone in p
    perm = torch.randperm(d, generator=g)
    torch.testing.assert_close(F.scale_factor(z[:, perm], hi), r_hi)
    # numpy reference: the OpenOOD formula on ReLU(z)
    k = d - int(np.round(d * hi / 100.0))
    a = np.maximum(z.numpy(), 0)
    ref = a.sum(1) / np.sort(a, 1)[:, ::-1][:, :k].sum(1)
    np.testing.assert_allclose(r_hi.numpy(), ref, rtol=1e-12)


def test_scale_factor_per_sample_percentile_matches_rowwise():
    g = torch.Generator().manual_seed(3)
    z = torch.rand(5, 30, generator=g)
    p = torch.tensor([10.0, 60.0, 85.0, 0.0, 93.3])
    rowwise = torch.stack([F.scale_factor(z[i : i + 1], float(p[i]))[0] for i in range(5)])
    torch.testing.assert_close(F.scale_factor(z, p), rowwise)


def test_ecdf_and_adaptive_percentile_match_statsmodels():
    ECDF = pytest.importorskip("statsmodels.distributions.empirical_distribution").ECDF
    g = torch.Generator().manual_seed(0)
    fit = torch.randn(300, generator=g, dtype=torch.float64).round(decimals=1)  # ties
    q = torch.cat([torch.randn(200, generator=g, dtype=torch.float64), fit[:20]])
    ref = ECDF(fit.numpy())(q.numpy())
    np.testing.assert_allclose(F.ecdf(q, fit.sort().values).numpy(), ref, rtol=0, atol=1e-15)
    p = F.adaptive_percentile(q, fit, p_min=60, p_max=85)
    np.testing.assert_allclose(p.numpy(), 60 + (1 - ref) * 25, rtol=0, atol=1e-12)


def test_adaptive_percentile_bounds_monotone_and_steps():
    fit = torch.arange(200, dtype=torch.float64)
    q = torch.linspace(-5, 205, 1000, dtype=torch.float64)
    p = F.adaptive_percentile(q, fit, p_min=60, p_max=90)
    assert float(p.min()) == 60 and float(p.max()) == 90
    assert bool((p.diff() <= 0).all())  # non-increasing in Q'
    assert F.adaptive_percentile(torch.tensor([-1.0]), fit, p_min=60, p_max=90).item() == 90
    assert F.adaptive_percentile(torch.tensor([199.0]), fit, p_min=60, p_max=90).item() == 60
    steps = p.unique().sort().values.diff()
    torch.testing.assert_close(steps, torch.full_like(steps, 30 / 200))  # heights 1/n_fit


class Linear2Logits(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.w = w

    def forward(self, x):
        return x.flatten(1) @ self.w.T


def test_input_gradient_against_jacobian_and_closed_form():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(4, 12, generator=g, dtype=torch.float64)
    model = Linear2Logits(w)
    x = torch.randn(5, 3, 4, generator=g, dtype=torch.float64)
    grad = F.input_gradient(model, x)
    pred = model(x).argmax(1)
    torch.testing.assert_close(grad.flatten(1), w[pred])  # closed form: g = W[y^]
    jac = torch.autograd.functional.jacobian(lambda t: model(t).max(1).values.sum(), x)
    torch.testing.assert_close(grad, jac)


def test_input_gradient_under_no_grad_and_params_untouched():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(8, 3))
    x = torch.randn(4, 2, 4)
    with torch.no_grad():
        g = F.input_gradient(model, x)
    assert g.shape == x.shape and g.abs().sum() > 0
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize("shape", [(3, 20), (3, 4, 5), (3, 2, 5, 4), (3, 1, 2, 5, 4)])
def test_gradient_perturbation_moves_only_smallest_gradient_elements(shape):
    torch.manual_seed(1)
    numel = math.prod(shape[1:])
    w = torch.randn(3, numel)
    w[:, :3] = 0.0  # three elements with exactly zero gradient for every class
    model = Linear2Logits(w)
    x = torch.randn(shape)
    o, eps = 0.2, 0.5
    x_tilde = F.gradient_perturbation(model, x, o=o, eps=eps)
    n = math.floor(numel * o)
    g = w[model(x).argmax(1)]
    delta = (x_tilde - x).flatten(1)
    for i in range(shape[0]):
        moved = delta[i].nonzero().flatten()
        assert len(moved) <= n
        torch.testing.assert_close(delta[i, moved].abs(), torch.full((len(moved),), eps))
        torch.testing.assert_close(delta[i, moved].sign(), g[i, moved].sign())
        smallest = set(g[i].abs().topk(n, largest=False).indices.tolist())
        assert set(moved.tolist()) <= smallest
        assert bool((delta[i, :3] == 0).all())  # sign(0) = 0: zero-gradient elements stay
        assert len(moved) == n - 3  # the other selected ones all move


def test_ood_statistic_by_hand_for_a_linear_feature_map():
    # phi(x) = A x: the shift z~ - z = A (eps sign(g) 1_M) is analytic.
    torch.manual_seed(2)
    d, m = 200, 30
    a = torch.randn(d, m, dtype=torch.float64)
    head = torch.randn(4, d, dtype=torch.float64)
    x = torch.randn(6, m, dtype=torch.float64)
    model = Linear2Logits(head @ a)
    x_tilde = F.gradient_perturbation(model, x, o=0.1, eps=0.3)
    z, z_tilde = x @ a.T, x_tilde @ a.T
    q = F.ood_statistic(z, z_tilde, k1=0.01, k2=0.05, lam=10.0)
    g = (head @ a)[model(x).argmax(1)]
    for i in range(6):
        sel = g[i].abs().argsort()[:3]
        step = torch.zeros(m, dtype=torch.float64)
        step[sel] = 0.3 * g[i, sel].sign()
        shift = a @ step
        top = z[i].argsort(descending=True)
        q_hand = shift[top[:2]].abs().sum()  # k1 = 1 % of 200 = 2
        c_hand = (z[i] + shift)[top[:10]].clamp(min=0).sum()  # k2 = 5 % = 10
        torch.testing.assert_close(q[i], 10 * q_hand + c_hand)


def test_ood_statistic_is_one_function_and_not_the_swapped_head():
    g = torch.Generator().manual_seed(4)
    z = torch.randn(50, 300, generator=g)
    zt = z + 0.3 * torch.randn(50, 300, generator=g)
    q = F.ood_statistic(z, zt, k1=0.01, k2=0.05, lam=10)
    swapped = F.ood_statistic(z, zt, k1=0.05, k2=0.01, lam=10)
    assert not torch.allclose(q, swapped)  # the roles of k1/k2 matter, so this test can fail


def test_baseline_shapes_by_hand():
    z = torch.tensor([[4.0, 3.0, 2.0, 1.0]])
    torch.testing.assert_close(F.ash_p(z, 50), torch.tensor([[4.0, 3.0, 0.0, 0.0]]))
    torch.testing.assert_close(F.ash_b(z, 50), torch.tensor([[5.0, 5.0, 0.0, 0.0]]))
    torch.testing.assert_close(
        F.ash_s(z, 50), torch.tensor([[4.0, 3.0, 0.0, 0.0]]) * math.exp(10 / 7)
    )
    torch.testing.assert_close(F.scale(z, 50), z * math.exp(10 / 7))
    torch.testing.assert_close(F.lts_factor(z, 50), torch.tensor([(10 / 7) ** 2]))
    torch.testing.assert_close(F.react(z, 2.5), torch.tensor([[2.5, 2.5, 2.0, 1.0]]))
    torch.testing.assert_close(
        F.energy(torch.tensor([[0.0, math.log(3.0)]])), torch.tensor([math.log(4.0)])
    )


def test_optfs_shape_and_theta_against_a_loop():
    g = torch.Generator().manual_seed(5)
    z = torch.rand(40, 16, generator=g, dtype=torch.float64) * 2
    w = torch.randn(40, 16, generator=g, dtype=torch.float64)
    left, width, bins = 0.1, 0.3, 6
    theta = F.optfs_theta(z, w, left, width, bins)
    ref = np.zeros(bins)
    for k in range(bins):
        b = left + k * width
        mask = (z >= b) & (z < b + width)
        ref[k] = float((mask * w * z).sum(1).mean())
    np.testing.assert_allclose(theta.numpy(), ref / np.linalg.norm(ref) * 1000, rtol=1e-10)
    shaped = F.optfs_shape(z, left, width, theta)
    expect = torch.zeros_like(z)
    for k in range(bins):
        b = left + k * width
        mask = (z >= b) & (z < b + width)
        expect += mask * z * theta[k]
    torch.testing.assert_close(shaped, expect)
