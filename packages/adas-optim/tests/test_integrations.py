import pytest
import torch
from adas_optim import AdaS
from adas_optim.integrations import create_adas_timm_style, no_decay_param_groups


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.dense = torch.nn.Linear(4, 4)
        self.LayerNorm = torch.nn.LayerNorm(4)
        self.pos = torch.nn.Parameter(torch.zeros(3, 4))
        self.frozen = torch.nn.Parameter(torch.zeros(2, 2), requires_grad=False)

    def no_weight_decay(self):
        return {"pos"}


def names(model, group):
    ids = {id(p) for p in group["params"]}
    return sorted(n for n, p in model.named_parameters() if id(p) in ids)


def test_transformers_style_groups():
    model = Tiny()
    decay, rest = no_decay_param_groups(model, 0.02)
    assert names(model, decay) == ["dense.weight", "pos"]
    assert names(model, rest) == ["LayerNorm.bias", "LayerNorm.weight", "dense.bias"]
    assert (decay["weight_decay"], rest["weight_decay"]) == (0.02, 0.0)


def test_timm_style_factory():
    model = Tiny()
    opt = create_adas_timm_style(model, lr=5e-3, weight_decay=0.06, gamma=2.0)
    assert isinstance(opt, AdaS)
    decay, rest = opt.param_groups
    assert names(model, decay) == ["dense.weight"]  # pos is in no_weight_decay(), 1-D never decays
    assert names(model, rest) == ["LayerNorm.bias", "LayerNorm.weight", "dense.bias", "pos"]
    assert decay["weight_decay"] == 0.06 and rest["weight_decay"] == 0.0
    assert decay["gamma"] == 2.0 and decay["lr"] == 5e-3


def test_register_mmengine():
    pytest.importorskip("mmengine")
    from adas_optim.integrations import register_mmengine
    from mmengine.registry import OPTIMIZERS

    register_mmengine()
    opt = OPTIMIZERS.build(dict(type="AdaS", params=Tiny().parameters(), lr=7.5e-4, gamma=1.0))
    assert isinstance(opt, AdaS)


def test_register_timm():
    pytest.importorskip("timm")
    import timm.optim
    from adas_optim.integrations import register_timm

    register_timm()
    assert isinstance(timm.optim.create_optimizer_v2(Tiny(), "adas", lr=1e-3), AdaS)
