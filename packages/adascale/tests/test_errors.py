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


def _bn_buffers(net):
    return [b.clone() for b in net.buffers()]


@pytest.mark.parametrize("how", ["bound method", "module"])
def test_train_mode_scores_in_eval_and_restores_the_mode(make_net, images, how):
    torch.manual_seed(0)
    net = make_net()
    fit, x = images[:24], images[24:]

    def backbone(model):
        if how == "bound method":  # model.features: the owning module is not a submodule
            return model.features
        return nn.Sequential(model.body, nn.AdaptiveAvgPool2d(1), nn.Flatten()).train(
            model.training
        )

    net.eval()
    want = make(net).fit(fit).score(x)
    want_scale = SCALE(backbone(net), net.fc).score(x)
    net.train()
    before = _bn_buffers(net)
    with pytest.warns(UserWarning, match=r"train\(\) mode"):
        got = AdaSCALE(backbone(net), net.fc, n_fit=None).fit(fit).score(x)
    with pytest.warns(UserWarning, match=r"train\(\) mode"):
        got_scale = SCALE(backbone(net), net.fc).score(x)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    torch.testing.assert_close(got_scale, want_scale, rtol=0, atol=0)
    for a, b in zip(before, _bn_buffers(net), strict=True):
        assert torch.equal(a, b)  # BatchNorm's running statistics did not move
    assert all(m.training for m in net.modules())  # the caller's mode is restored


def test_empty_batch(tiny_net, images):
    det = make(tiny_net).fit(images)
    with pytest.raises(ValueError, match=r"non-empty batch .* \(0, 2, 6, 6\)"):
        det.score(images[:0])
    with pytest.raises(ValueError, match="non-empty batch"):
        SCALE(tiny_net.features, tiny_net.fc).score(images[:0])
    with pytest.raises(ValueError):
        make(tiny_net).fit(images[:0])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64])
def test_other_dtype_inputs_are_refused_not_cast(tiny_net, images, dtype):
    det = make(tiny_net).fit(images)
    with pytest.raises(TypeError, match=rf"{dtype} but the model's weights are torch.float32"):
        det.score(images.to(dtype))
    with pytest.raises(TypeError, match=str(dtype)):
        SCALE(tiny_net.features, tiny_net.fc).score(images.to(dtype))


def test_float64_model_computes_in_float64(make_net, images):
    torch.manual_seed(0)
    net = make_net().eval()
    want = make(net).fit(images).score(images)
    net64 = make_net().eval()
    net64.load_state_dict(net.state_dict())
    net64.double()
    got = make(net64).fit(images.double()).score(images.double())
    assert got.dtype == torch.float64
    torch.testing.assert_close(got.float(), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["eps", "lam"])
@pytest.mark.parametrize("value", [-1.0, float("nan"), float("inf")])
def test_negative_or_non_finite_eps_and_lam(tiny_net, images, name, value):
    with pytest.raises(ValueError, match=rf"{name} must be a finite number >= 0, got {value}"):
        make(tiny_net, **{name: value})
    det = make(tiny_net).fit(images)
    setattr(det, name, value)  # set after construction (a sweep does): refused when used
    with pytest.raises(ValueError, match=rf"{name} must be a finite number >= 0, got {value}"):
        det.score(images)


def test_fraction_where_a_percentile_is_expected_warns(tiny_net):
    with pytest.warns(UserWarning, match=r"percentile=0.85 .* \[0, 100\) .* percentile=85"):
        SCALE(tiny_net.features, tiny_net.fc, percentile=0.85)
    with pytest.warns(UserWarning, match=r"p_max=0.9 .* p_max=90"):
        make(tiny_net, p_min=0.5, p_max=0.9)


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
