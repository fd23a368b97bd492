"""Interop with spikingjelly (the `spikingjelly` extra): our pure-torch LIF is its ``LIFNode`` in
multi-step mode, forward spikes and surrogate gradients alike, and AdaS trains a model built from
its neurons. Skips where spikingjelly does not import (its wheel wants torchvision and torchaudio
builds that do not install next to every torch)."""

import pytest
import torch
from adas_optim import AdaS
from adas_optim.snn import LIF, ATanSurrogate, SigmoidSurrogate

sj_neuron = pytest.importorskip("spikingjelly.activation_based.neuron")
sj_surrogate = pytest.importorskip("spikingjelly.activation_based.surrogate")
sj_functional = pytest.importorskip("spikingjelly.activation_based.functional")


@pytest.mark.parametrize("v_reset", [0.0, None])
@pytest.mark.parametrize("decay_input", [True, False])
@pytest.mark.parametrize("detach_reset", [True, False])
@pytest.mark.parametrize("kind", ["sigmoid", "atan"])
def test_lif_equals_spikingjelly_lifnode(v_reset, decay_input, detach_reset, kind):
    ours_sg, theirs_sg = (
        (SigmoidSurrogate(4.0), sj_surrogate.Sigmoid(alpha=4.0))
        if kind == "sigmoid"
        else (ATanSurrogate(2.0), sj_surrogate.ATan(alpha=2.0))
    )
    ours = LIF(
        tau=2.0,
        v_threshold=1.0,
        v_reset=v_reset,
        decay_input=decay_input,
        detach_reset=detach_reset,
        surrogate=ours_sg,
    )
    theirs = sj_neuron.LIFNode(
        tau=2.0,
        decay_input=decay_input,
        v_threshold=1.0,
        v_reset=v_reset,
        surrogate_function=theirs_sg,
        detach_reset=detach_reset,
        step_mode="m",
    )
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(8, 3, 5, generator=g) * 3).requires_grad_()
    upstream = torch.randn(8, 3, 5, generator=g)
    s_ours = ours(x)
    (grad_ours,) = torch.autograd.grad(s_ours, x, upstream)
    sj_functional.reset_net(theirs)
    s_theirs = theirs(x)
    (grad_theirs,) = torch.autograd.grad(s_theirs, x, upstream)
    assert s_ours.sum() > 0  # some spikes, so the reset is exercised
    torch.testing.assert_close(s_ours, s_theirs, rtol=0, atol=0)
    torch.testing.assert_close(grad_ours, grad_theirs, rtol=1e-5, atol=1e-6)


def test_adas_trains_a_spikingjelly_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(4, 16),  # acts on the last dim of [T, B, 4]
        sj_neuron.LIFNode(tau=2.0, step_mode="m"),
    )
    head = torch.nn.Linear(16, 2)
    opt = AdaS([*model.parameters(), *head.parameters()], lr=1e-2)
    x, y = torch.rand(4, 32, 4) * 2, torch.randint(0, 2, (32,))
    losses = []
    for _ in range(30):
        sj_functional.reset_net(model)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(head(model(x).mean(0)), y)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < losses[0]
    assert all(torch.isfinite(p).all() for p in model.parameters())
