"""The per-snapshot optimiser against closed forms and torch.optim."""

import math

import numpy as np
import pytest
import torch
from antic_compress.training import AdamW, FitConfig, cosine_lr, flatten_parameters


def numpy_adamw(p, grads, lr, wd, b1=0.9, b2=0.999, eps=1e-8):
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        p = p * (1 - lr * wd)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr / (1 - b1**t) * m / (np.sqrt(v / (1 - b2**t)) + eps)
    return p


def test_adamw_matches_the_closed_form():
    rng = np.random.default_rng(0)
    p0 = rng.normal(size=7)
    grads = [rng.normal(size=7) for _ in range(5)]
    param = torch.nn.Parameter(torch.tensor(p0))
    opt = AdamW(param, weight_decay=0.1)
    for g in grads:
        param.grad = torch.tensor(g)
        opt.step(1e-2)
    assert np.allclose(param.detach().numpy(), numpy_adamw(p0, grads, 1e-2, 0.1), atol=1e-12)


@pytest.mark.slow
def test_adamw_matches_torch_optim():
    rng = np.random.default_rng(1)
    p0 = rng.normal(size=(4, 3))
    a = torch.nn.Parameter(torch.tensor(p0))
    b = torch.nn.Parameter(torch.tensor(p0))
    ours, ref = (
        AdamW(a, weight_decay=1e-4),
        torch.optim.AdamW([b], lr=1e-3, weight_decay=1e-4, eps=1e-8),
    )
    for _ in range(4):
        g = torch.tensor(rng.normal(size=(4, 3)))
        a.grad, b.grad = g.clone(), g.clone()
        ours.step(1e-3)
        ref.step()
    assert torch.allclose(a, b, atol=1e-12)


def test_cosine_schedule_endpoints():
    assert cosine_lr(0, 100, 1e-3, 1e-5) == pytest.approx(1e-3)
    assert cosine_lr(100, 100, 1e-3, 1e-5) == pytest.approx(1e-5)
    assert cosine_lr(50, 100, 1e-3, 1e-5) == pytest.approx((1e-3 + 1e-5) / 2)
    assert math.isfinite(cosine_lr(3, 0, 1e-3, 1e-5))


def test_flat_parameters_are_views():
    layer = torch.nn.Linear(3, 2)
    w = layer.weight.detach().clone()
    flat = flatten_parameters(list(layer.parameters()))
    assert flat.numel() == 8 and torch.equal(layer.weight, w)
    with torch.no_grad():
        flat.add_(1.0)
    assert torch.equal(layer.weight, w + 1.0)


@pytest.mark.parametrize(
    "kwargs",
    [dict(epochs=0), dict(lr=0.0), dict(end_lr=1.0), dict(weight_decay=-1.0), dict(batch_size=0)],
)
def test_bad_fit_config(kwargs):
    with pytest.raises(ValueError):
        FitConfig(**kwargs)
