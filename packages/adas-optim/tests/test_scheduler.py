import pytest
import torch
from adas_optim import AdaS, LinearGammaScheduler


def make_opt():
    params = [torch.nn.Parameter(torch.randn(2, 2)), torch.nn.Parameter(torch.randn(3))]
    return AdaS([{"params": params[:1]}, {"params": params[1:], "gamma": 5.0}], gamma=3.0)


@pytest.mark.parametrize(("start", "end", "epochs"), [(1.0, 0.0, 5), (1.2, 0.8, 11), (0.0, 2.0, 2)])
def test_gamma_sequence(start, end, epochs):
    opt = make_opt()
    sched = LinearGammaScheduler(opt, start, end, epochs)
    seen = [opt.param_groups[1]["gamma"]]
    for _ in range(epochs + 2):
        sched.step()
        seen.append(opt.param_groups[1]["gamma"])
        assert opt.param_groups[0]["gamma"] == seen[-1]  # every group follows the schedule
    expected = [start] + [
        start + (end - start) * min(e / (epochs - 1), 1) for e in range(1, epochs + 3)
    ]
    assert seen == pytest.approx(expected)
    assert seen[epochs - 1] == pytest.approx(end)


def test_one_epoch_goes_to_the_end_value():
    opt = make_opt()
    sched = LinearGammaScheduler(opt, 1.0, 0.25, total_epochs=1)
    assert opt.param_groups[0]["gamma"] == 1.0
    sched.step()
    assert opt.param_groups[0]["gamma"] == 0.25


def test_state_dict_round_trip():
    opt = make_opt()
    sched = LinearGammaScheduler(opt, 1.0, 0.0, 10)
    for _ in range(4):
        sched.step()
    state = sched.state_dict()
    assert "optimizer" not in state
    opt2 = make_opt()
    sched2 = LinearGammaScheduler(opt2, 9.0, 9.0, 3)
    sched2.load_state_dict(state)
    assert opt2.param_groups[0]["gamma"] == opt.param_groups[0]["gamma"] == pytest.approx(1 - 4 / 9)
    sched.step()
    sched2.step()
    assert opt2.param_groups[0]["gamma"] == opt.param_groups[0]["gamma"]
