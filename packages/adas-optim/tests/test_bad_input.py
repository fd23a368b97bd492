"""Spec section 8: each bad input fails at the boundary with a message naming the value."""

import math

import pytest
import torch
from adas_optim import AdaS, LinearGammaScheduler
from adas_optim.snn import LIF, TinySpikformer


def param():
    return [torch.nn.Parameter(torch.randn(3, 3))]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lr": -1e-3}, "Invalid learning rate: -0.001"),
        ({"eps": -1.0}, "Invalid epsilon value: -1.0"),
        ({"weight_decay": -0.1}, "Invalid weight_decay value: -0.1"),
        ({"betas": (1.0, 0.999)}, "Invalid beta parameter at index 0: 1.0"),
        ({"betas": (0.9, -0.1)}, "Invalid beta parameter at index 1: -0.1"),
        ({"gamma": -1.0}, "gamma must be >= 0, got -1.0"),
        ({"gamma": math.nan}, "gamma must be >= 0, got nan"),
        ({"sgd_component": "adam"}, "sgd_component must be one of"),
    ],
)
def test_bad_hyper_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        AdaS(param(), **kwargs)


def test_torch_adamw_gives_the_same_messages():
    for kwargs in ({"lr": -1e-3}, {"eps": -1.0}, {"weight_decay": -0.1}, {"betas": (1.0, 0.9)}):
        with pytest.raises(ValueError) as ours:
            AdaS(param(), **kwargs)
        with pytest.raises(ValueError) as theirs:
            torch.optim.AdamW(param(), **kwargs)
        assert str(ours.value) == str(theirs.value)


def test_bad_group_override_is_caught():
    with pytest.raises(ValueError, match="gamma must be >= 0, got -2"):
        AdaS([{"params": param(), "gamma": -2}])


def test_sparse_gradient():
    p = torch.nn.Parameter(torch.randn(4, 3))
    p.grad = torch.randn(4, 3).to_sparse()
    with pytest.raises(RuntimeError, match="AdaS does not support sparse gradients"):
        AdaS([p]).step()


def test_complex_parameters():
    with pytest.raises(TypeError, match=r"complex parameters.*complex64.*view_as_real"):
        AdaS([torch.nn.Parameter(torch.randn(3, dtype=torch.complex64))])


@pytest.mark.parametrize("loss", [torch.tensor(0.5), 0.5])
def test_official_step_with_a_loss_value(loss):
    p = param()
    p[0].grad = torch.randn(3, 3)
    with pytest.raises(TypeError, match=r"step\(current_loss\) form is not supported.*README"):
        AdaS(p).step(loss)


def test_scheduler_on_an_optimizer_without_gamma():
    opt = torch.optim.SGD([{"params": param()}, {"params": param()}], lr=0.1)
    with pytest.raises(ValueError, match="param group 0 of SGD has no 'gamma'"):
        LinearGammaScheduler(opt)


def test_scheduler_bad_arguments():
    with pytest.raises(ValueError, match="end_gamma must be >= 0, got -1"):
        LinearGammaScheduler(AdaS(param()), end_gamma=-1)
    with pytest.raises(ValueError, match="total_epochs must be >= 1, got 0"):
        LinearGammaScheduler(AdaS(param()), total_epochs=0)


def test_lif_without_time_dimension():
    with pytest.raises(ValueError, match=r"time dimension first; got shape \(5,\)"):
        LIF()(torch.randn(5))
    with pytest.raises(ValueError, match=r"expects 4 time steps in dim 0, got shape \(8, 16\)"):
        LIF(time_steps=4)(torch.randn(8, 16))


@pytest.mark.parametrize(("v_threshold", "v_reset"), [(0.0, 0.0), (-1.0, 0.0)])
def test_lif_threshold_not_above_reset(v_threshold, v_reset):
    with pytest.raises(ValueError, match=f"v_threshold={v_threshold}, v_reset={v_reset}"):
        LIF(v_threshold=v_threshold, v_reset=v_reset)


def test_spikformer_wrong_input_shape():
    with pytest.raises(ValueError, match=r"got shape \(2, 64\)"):
        TinySpikformer()(torch.randn(2, 64))
