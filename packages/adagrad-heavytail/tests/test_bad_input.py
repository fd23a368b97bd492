"""Spec §8: bad arguments give clear errors naming the value."""

import pytest
import torch
from adagrad_heavytail.optim import NSGDM, AdaGrad, AdaGradNorm, ClippedSGD


def params():
    return [torch.nn.Parameter(torch.zeros(3))]


@pytest.mark.parametrize(
    "make,match",
    [
        (lambda: AdaGrad(params(), lr=0.0), "learning rate: 0.0"),
        (lambda: AdaGrad(params(), lr=-1.0), "learning rate"),
        (lambda: AdaGrad(params(), lr=float("nan")), "learning rate"),
        (lambda: AdaGrad(params(), eps=-1e-8), "epsilon"),
        (lambda: AdaGrad(params(), initial_accumulator_value=-0.1), "initial_accumulator_value"),
        (lambda: AdaGrad(params(), lr_decay=-1), "lr_decay"),
        (lambda: AdaGradNorm(params(), lr=0.0), "learning rate"),
        (lambda: AdaGradNorm(params(), eps=-1.0), "epsilon"),
        (
            lambda: AdaGradNorm(params(), initial_accumulator_value=-1.0),
            "initial_accumulator_value",
        ),
        (lambda: AdaGradNorm(params(), scope="layer"), "scope must be one of"),
        (lambda: ClippedSGD(params(), lr=0.1, clip=0.0), "clip"),
        (lambda: ClippedSGD(params(), lr=0.1, clip=1.0, momentum=1.0), "momentum"),
        (lambda: NSGDM(params(), lr=0.1, beta=1.0), "beta"),
        (lambda: NSGDM(params(), lr=-0.1), "learning rate"),
    ],
)
def test_bad_optimizer_arguments(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_norm_methods_refuse_sparse_gradients():
    emb = torch.nn.Embedding(5, 2, sparse=True)
    opt = AdaGradNorm(emb.parameters(), lr=0.1)
    emb(torch.tensor([1])).sum().backward()
    with pytest.raises(RuntimeError, match="sparse"):
        opt.step()


def test_a_step_without_gradients_changes_nothing():
    p = params()
    for cls, kw in (
        (AdaGrad, {}),
        (AdaGradNorm, {}),
        (ClippedSGD, {"lr": 0.1, "clip": 1.0}),
        (NSGDM, {"lr": 0.1}),
    ):
        cls(p, **kw).step()
    assert torch.equal(p[0], torch.zeros(3))


def test_float32_parameters_stay_float32():
    p = [torch.nn.Parameter(torch.ones(4, dtype=torch.float32))]
    opt = AdaGradNorm(p, lr=0.1)
    p[0].grad = torch.ones(4)
    opt.step()
    assert p[0].dtype == torch.float32
    torch.testing.assert_close(p[0].detach(), torch.full((4,), 1 - 0.1 / (2 + 1e-10)))
