"""Model-level quantization, fake quantization and safetensors round trips."""

import mixfp4
import pytest
import torch
from torch import nn


def _mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(40, 64), nn.GELU(), nn.Linear(64, 8, bias=False))


def _x():
    return torch.randn(5, 40, generator=torch.Generator().manual_seed(1))


def test_weight_only_layers_compute_with_the_dequantized_weight():
    model, ref = _mlp(), _mlp()
    mixfp4.quantize_(model, mixfp4.MixFP4WeightOnlyConfig())
    assert isinstance(model[0], mixfp4.MixFP4Linear) and isinstance(model[2], mixfp4.MixFP4Linear)
    w0 = mixfp4.dequantize(mixfp4.quantize_mixfp4(ref[0].weight.detach()))
    torch.testing.assert_close(model[0].weight, w0, rtol=0, atol=0)
    h = nn.functional.gelu(nn.functional.linear(_x(), w0, ref[0].bias))
    expected = nn.functional.linear(h, model[2].weight)
    torch.testing.assert_close(model(_x()), expected)
    assert model[0].weight_codes.dtype == torch.uint8
    assert "fmt=mixfp4" in repr(model)
    assert repr(model[0].packed).startswith("MX4Packed(fmt='mixfp4', shape=(64, 40), block_size=16")


def test_w4a4_quantizes_activations_dynamically():
    model, ref = _mlp(), _mlp()
    cfg = mixfp4.MixFP4DynamicActivationMixFP4WeightConfig(fmt="nvfp4")
    mixfp4.quantize_(model, cfg, filter_fn=lambda m, fqn: fqn == "0")
    assert isinstance(model[2], nn.Linear)
    xq = mixfp4.fake_quantize(_x(), "nvfp4")
    w = mixfp4.dequantize(mixfp4.quantize_nvfp4(ref[0].weight.detach()))
    torch.testing.assert_close(model[0](_x()), nn.functional.linear(xq, w, ref[0].bias))


def test_fake_quantize_has_a_straight_through_gradient():
    x = torch.randn(3, 32, requires_grad=True)
    y = mixfp4.fake_quantize(x)
    assert y.dtype == x.dtype and y.shape == x.shape
    (y * torch.arange(32.0)).sum().backward()
    torch.testing.assert_close(x.grad, torch.arange(32.0).expand(3, 32))
    assert not mixfp4.fake_quantize(x, ste=False).requires_grad
    torch.testing.assert_close(y.detach(), mixfp4.dequantize(mixfp4.quantize_mixfp4(x)))


def test_model_saves_and_reloads_bit_identically(tmp_path):
    model = _mlp()
    cfg = mixfp4.MixFP4DynamicActivationMixFP4WeightConfig(act_fmt="mxfp4")
    mixfp4.quantize_(model, cfg)
    path = tmp_path / "model.safetensors"
    mixfp4.save_quantized(model, path)
    fresh = mixfp4.load_quantized(_mlp(seed=7), path)
    for i in (0, 2):
        assert fresh[i].packed.equal(model[i].packed)
        assert fresh[i].act == model[i].act
    assert torch.equal(fresh(_x()), model(_x()))
    with pytest.raises(ValueError, match="use load_quantized"):
        mixfp4.load_packed(path)


def test_packed_tensors_round_trip_through_safetensors(tmp_path):
    x = torch.randn(6, 50)
    tensors = {
        "mix": mixfp4.quantize_mixfp4(x),
        "frac": mixfp4.quantize_mixfp4(x, e1m2_mode="frac"),
        "nv": mixfp4.quantize_nvfp4(x),
        "mx": mixfp4.quantize_mxfp4(x),
    }
    path = tmp_path / "packed.safetensors"
    mixfp4.save_packed(path, tensors)
    back = mixfp4.load_packed(path)
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        assert "multiplier" in f.metadata()["mixfp4"]
    assert set(back) == set(tensors)
    for k, p in tensors.items():
        assert back[k].equal(p)
        assert torch.equal(mixfp4.dequantize(back[k]), mixfp4.dequantize(p))
    with pytest.raises(TypeError, match="expected MX4Packed"):
        mixfp4.save_packed(path, {"x": x})


def test_quantize_rejects_bad_arguments():
    with pytest.raises(TypeError, match=r"nn\.Module"):
        mixfp4.quantize_("model")
    with pytest.raises(TypeError, match="MixFP4 config"):
        mixfp4.quantize_(_mlp(), {"fmt": "nvfp4"})
    with pytest.raises(ValueError, match="fmt must be one of"):
        mixfp4.MixFP4WeightOnlyConfig(fmt="int4")
