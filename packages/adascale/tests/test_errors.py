"""The spec's bad-input list (section 8): each gives a clear error or warning naming the value."""

import pytest
import torch
from adascale import SCALE, AdaSCALE, NotFittedError, OptFS, ReAct, scale_factor
from torch import nn


def make(net, **kw):
    return AdaSCALE(net.features, net.fc, n_fit=None, **kw)


@pytest.mark.parametrize(("p_min", "p_max"), [(85, 60), (0, 80), (60, 100), (-1, 50)])
def test_bad_percentiles(tiny_net, p_min, p_max):
    with pytest.raises(ValueError, match=f"p_min={p_min}"):
        make(tiny_net, p_min=p_min, p_max=p_max)


def test_equal_percentiles_are_allowed(tiny_net):
    make(tiny_net, p_min=70, p_max=70)


def test_fractions_rounding_to_zero_name_d(tiny_net, images):
    with pytest.raises(ValueError, match=r"k1=0.001 .* D=200"):
        make(tiny_net, k1=0.001)
    with pytest.raises(ValueError, match=r"k2=0.004 .* D=200"):
        make(tiny_net, k2=0.004)
    with pytest.raises(ValueError, match="fraction"):
        make(tiny_net, o=0)
    det = make(tiny_net, o=0.001)  # 72 input elements: floor(0.072) = 0
    with pytest.raises(ValueError, match=r"o=0.001 .* numel=72"):
        det.fit(images)


def test_predict_before_fit(tiny_net, images):
    with pytest.raises(NotFittedError, match="requires fit"):
        make(tiny_net).predict(images)
    with pytest.raises(NotFittedError, match="requires fit"):
        ReAct(tiny_net.features, tiny_net.fc).score(images)
    with pytest.raises(NotFittedError, match="requires fit"):
        OptFS(tiny_net.features, tiny_net.fc).score(images)


def test_small_n_fit_warns(tiny_net):
    with pytest.warns(UserWarning, match="n_fit=50 < 100"):
        AdaSCALE(tiny_net.features, tiny_net.fc, n_fit=50)


def test_no_positive_feature_raises_or_nan():
    z = torch.tensor([[-1.0, -2.0, -3.0, -0.5], [1.0, 2.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match="sample 0 has no positive feature"):
        scale_factor(z, 50.0)
    r = scale_factor(z, 50.0, on_degenerate="nan")
    assert torch.isnan(r[0]) and r[1] == 1.0


def test_integer_and_raw_pixel_inputs(tiny_net, images):
    det = make(tiny_net).fit(images)
    with pytest.raises(TypeError, match="uint8"):
        det.score((images * 10).clamp(0, 255).to(torch.uint8))
    with pytest.warns(UserWarning, match=r"\[0, 255\]"):
        det.score(images * 100)


def test_train_mode_switches_to_eval_with_a_warning(make_net, images):
    net = make_net().train()
    with pytest.warns(UserWarning, match="train"):
        SCALE(nn.Sequential(net.body, nn.AdaptiveAvgPool2d(1), nn.Flatten()), net.fc).score(images)
    assert not net.body.training


def test_inference_mode_raises_with_advice_and_no_grad_works(tiny_net, images):
    det = make(tiny_net).fit(images)
    with torch.no_grad():
        det.score(images[:2])
    with torch.inference_mode(), pytest.raises(RuntimeError, match="inference_mode"):
        det.score(images[:2])


def test_nan_features(tiny_net, images):
    det = make(tiny_net).fit(images)
    bad = images.clone()
    bad[0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN or Inf"):
        det.score(bad)


def test_non_linear_head(tiny_net):
    with pytest.raises(TypeError, match=r"final torch\.nn\.Linear"):
        AdaSCALE(tiny_net.features, nn.Sequential(nn.ReLU(), tiny_net.fc))


def test_bad_percentile_keeps_nothing():
    with pytest.raises(ValueError, match="keeps no activation of D=4"):
        scale_factor(torch.ones(1, 4), 99.0)
