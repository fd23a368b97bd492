"""Model-level quantization, fake quantization and safetensors round trips."""

import copy

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
    torch.testing.assert_close(model[0].dequantize_weight(), w0, rtol=0, atol=0)
    h = nn.functional.gelu(nn.functional.linear(_x(), w0, ref[0].bias))
    expected = nn.functional.linear(h, model[2].dequantize_weight())
    torch.testing.assert_close(model(_x()), expected)
    assert model[0].weight.dtype == torch.uint8 and not model[0].weight.requires_grad
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


# ---------------------------------------------------------------------------------------------
# 0.2: casts, nn.Linear interop, shared modules, QAT, PEFT
# ---------------------------------------------------------------------------------------------
def _decoded(model):
    return [model[i].dequantize_weight(torch.float32) for i in (0, 2)]


def _bits(model):
    return [model[i].packed for i in (0, 2)]


@pytest.mark.parametrize(
    "cast", [lambda m: m.to(torch.bfloat16), lambda m: m.half(), lambda m: m.double()]
)
def test_a_module_cast_leaves_the_quantized_bits_alone(cast):
    model = mixfp4.quantize_(_mlp(), mixfp4.MixFP4WeightOnlyConfig())
    before, packed = _decoded(model), _bits(model)
    cast(model)
    for b, a in zip(before, _decoded(model), strict=True):
        assert torch.equal(b, a)
    for p, q in zip(packed, _bits(model), strict=True):
        assert p.equal(q)
    assert model[0].bias.dtype != torch.float32  # the float parts did follow the cast
    y = model(_x().to(model[0].bias.dtype))
    assert y.dtype == model[0].bias.dtype and torch.isfinite(y).all()


def test_meta_device_state_dict_and_torch_save_round_trips(tmp_path):
    model = mixfp4.quantize_(_mlp(), mixfp4.MixFP4WeightOnlyConfig())
    before = _decoded(model)
    meta = copy.deepcopy(model).to("meta")
    assert meta[0].weight.is_meta and meta[0].weight.dtype == torch.uint8
    fresh = mixfp4.quantize_(_mlp(seed=3), mixfp4.MixFP4WeightOnlyConfig())
    fresh.load_state_dict(model.state_dict())
    for b, a in zip(before, _decoded(fresh), strict=True):
        assert torch.equal(b, a)
    torch.save(model, tmp_path / "m.pt")
    loaded = torch.load(tmp_path / "m.pt", weights_only=False)
    for b, a in zip(before, _decoded(loaded), strict=True):
        assert torch.equal(b, a)
    assert sorted(model[0].state_dict()) == [
        "bias",
        "weight",
        "weight_layout",
        "weight_scales",
        "weight_tensor_scale_bits",
    ]
    assert model[0].weight_tensor_scale_bits.dtype == torch.int32


_LAYOUTS = {
    "divisor": (
        {"weight_kwargs": {"tensor_scale_convention": "divisor"}},
        "tensor_scale_convention",
    ),
    "2-D": ({"weight_kwargs": {"block_2d": True}}, "block_rows"),
    "frac": ({"weight_kwargs": {"e1m2_mode": "frac"}}, "e1m2_mode"),
    "nvfp4": ({"fmt": "nvfp4"}, "fmt"),
}


@pytest.mark.parametrize("name", list(_LAYOUTS))
@pytest.mark.parametrize("saved_first", [True, False])
def test_state_dict_of_another_layout_is_refused_naming_both(name, saved_first):
    # before the weight_layout buffer, a divisor state_dict loaded into a multiplier layer decoded
    # 1.85e9 times too large, a frac one into an int layer 2.9x off, without a word
    kwargs, field = _LAYOUTS[name]
    other = mixfp4.MixFP4WeightOnlyConfig(**kwargs)
    default = mixfp4.MixFP4WeightOnlyConfig()
    src = mixfp4.quantize_(_mlp(), other if saved_first else default)
    dst = mixfp4.quantize_(_mlp(seed=3), default if saved_first else other)
    before = _decoded(dst)
    with pytest.raises(ValueError, match=r"layer '0'.*quantized with") as err:
        dst.load_state_dict(src.state_dict())
    assert f"with {field}=" in str(err.value) and "(this layer: " in str(err.value)
    for b, a in zip(before, _decoded(dst), strict=True):  # a refused load changes nothing
        assert torch.equal(b, a)
    # a layer of the same layout loads it exactly
    same = mixfp4.quantize_(_mlp(seed=4), other if saved_first else default)
    same.load_state_dict(src.state_dict())
    for b, a in zip(_decoded(src), _decoded(same), strict=True):
        assert torch.equal(b, a)


def test_state_dict_without_layout_loads_as_multiplier_1d():
    src = mixfp4.quantize_(_mlp(), mixfp4.MixFP4WeightOnlyConfig())
    old = {k: v for k, v in src.state_dict().items() if not k.endswith("weight_layout")}
    dst = mixfp4.quantize_(_mlp(seed=3), mixfp4.MixFP4WeightOnlyConfig())
    assert not dst.load_state_dict(old).missing_keys
    for b, a in zip(_decoded(src), _decoded(dst), strict=True):
        assert torch.equal(b, a)
    divisor = mixfp4.MixFP4WeightOnlyConfig(weight_kwargs={"tensor_scale_convention": "divisor"})
    dst = mixfp4.quantize_(_mlp(seed=3), divisor)
    with pytest.raises(ValueError, match=r"tensor_scale_convention='multiplier'.*'divisor'"):
        dst.load_state_dict(old)


def test_quantized_layer_is_an_nn_linear_with_its_weight_in_parameters():
    model = mixfp4.quantize_(_mlp(), mixfp4.MixFP4WeightOnlyConfig())
    layer = model[0]
    assert isinstance(layer, nn.Linear)
    names = dict(model.named_parameters())
    assert names["0.weight"] is layer.weight and names["0.weight"].dtype == torch.uint8
    assert (layer.in_features, layer.out_features) == (40, 64)
    with pytest.raises(RuntimeError, match="cannot be re-initialised"):
        layer.reset_parameters()
    # a second quantize_ does not re-quantize packed layers
    again = mixfp4.quantize_(model, mixfp4.MixFP4WeightOnlyConfig(fmt="nvfp4"))
    assert again[0] is layer


def test_a_linear_shared_by_two_parents_is_replaced_everywhere():
    shared = nn.Linear(32, 32)
    model = nn.ModuleDict({"a": nn.Sequential(shared), "b": nn.Sequential(shared, nn.ReLU())})
    mixfp4.quantize_(model, mixfp4.MixFP4WeightOnlyConfig())
    assert isinstance(model["a"][0], mixfp4.MixFP4Linear)
    assert model["b"][0] is model["a"][0]


def test_qat_layer_uses_the_ste_and_converts_to_the_same_decoded_weight():
    model = _mlp()
    mixfp4.quantize_(model, mixfp4.MixFP4QATConfig(fmt="mixfp4"))
    assert isinstance(model[0], mixfp4.MixFP4QATLinear) and isinstance(model[0], nn.Linear)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    target = torch.randn(5, 8, generator=torch.Generator().manual_seed(4))
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = ((model(_x()) - target) ** 2).mean()
        loss.backward()
        assert model[0].weight.grad is not None and model[0].weight.grad.abs().sum() > 0
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < losses[0]
    w_fake = mixfp4.fake_quantize(model[0].weight.detach(), "mixfp4")
    x_fake = mixfp4.fake_quantize(_x(), "mixfp4")
    expected = nn.functional.linear(x_fake, w_fake, model[0].bias)
    with torch.no_grad():
        torch.testing.assert_close(model[0](_x()), expected, rtol=0, atol=0)
    mixfp4.quantize_(model, mixfp4.MixFP4DynamicActivationMixFP4WeightConfig())
    assert isinstance(model[0], mixfp4.MixFP4Linear)
    assert torch.equal(model[0].dequantize_weight(), w_fake)


def test_peft_lora_trains_on_a_mixfp4_base():
    peft = pytest.importorskip("peft")
    model = mixfp4.quantize_(_mlp(), mixfp4.MixFP4WeightOnlyConfig())
    base = [model[i].packed for i in (0, 2)]
    lora = peft.get_peft_model(
        model, peft.LoraConfig(r=4, lora_alpha=8, target_modules=["0", "2"], lora_dropout=0.0)
    )
    trainable = [n for n, p in lora.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    opt = torch.optim.AdamW([p for p in lora.parameters() if p.requires_grad], lr=1e-2)
    target = torch.randn(5, 8, generator=torch.Generator().manual_seed(4))
    losses = []
    for _ in range(8):
        opt.zero_grad()
        loss = ((lora(_x()) - target) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < losses[0]
    layers = [m for m in lora.modules() if isinstance(m, mixfp4.MixFP4Linear)]
    assert len(layers) == 2
    for p, layer in zip(base, layers, strict=True):
        assert p.equal(layer.packed)  # the quantized base did not move


def _ct_mlp(seed=0):
    """An MLP whose input widths are whole 16-blocks (compressed-tensors has no padded layout)."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(48, 64), nn.GELU(), nn.Linear(64, 8, bias=False))


def _ct_x():
    return torch.randn(5, 48, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("fmt", ["nvfp4", "mixfp4"])
def test_compressed_tensors_checkpoint_round_trips_bit_identically(tmp_path, fmt):
    model = mixfp4.quantize_(_ct_mlp(), mixfp4.MixFP4WeightOnlyConfig(fmt=fmt))
    path = tmp_path / "ct.safetensors"
    config = mixfp4.save_compressed_tensors(model, path)
    assert config["format"] == f"{fmt}-pack-quantized"
    from safetensors.torch import load_file

    raw = load_file(str(path))
    assert raw["0.weight_packed"].dtype == torch.uint8
    assert raw["0.weight_packed"].shape == (64, 24)
    assert raw["0.weight_scale"].dtype == torch.float8_e4m3fn
    # the global scale is the divisor: q * weight_scale / global_scale decodes the weight
    w = model[0].dequantize_weight()
    codes = raw["0.weight_packed"]
    flags = (raw["0.weight_scale"].view(torch.uint8) >> 7).bool()
    assert bool(flags.any()) == (fmt == "mixfp4")
    if fmt == "nvfp4":
        from mixfp4.formats import E2M1
        from mixfp4.packed import unpack_nibbles

        s = raw["0.weight_scale"].float() / raw["0.weight_global_scale"]
        ct = (E2M1.decode(unpack_nibbles(codes)).reshape(64, 3, 16) * s.unsqueeze(-1)).reshape(
            64, 48
        )
        torch.testing.assert_close(ct, w, rtol=2e-7, atol=0)
    fresh = mixfp4.load_compressed_tensors(_ct_mlp(seed=5), path)
    for i in (0, 2):
        assert fresh[i].packed.equal(model[i].packed)
    assert torch.equal(fresh(_ct_x()), model(_ct_x()))


def test_compressed_tensors_export_refuses_a_padded_input_width(tmp_path):
    # in_features=40 is padded to 48 in our codes; compressed-tensors would read a [64, 48] weight.
    model = mixfp4.quantize_(_mlp(), mixfp4.MixFP4WeightOnlyConfig(fmt="nvfp4"))
    with pytest.raises(ValueError, match="in_features divisible by 16, got 40"):
        mixfp4.save_compressed_tensors(model, tmp_path / "ct.safetensors")
    # leaving the odd layer out is the way through
    model = mixfp4.quantize_(
        _mlp(), mixfp4.MixFP4WeightOnlyConfig(fmt="nvfp4"), filter_fn=lambda m, fqn: fqn == "2"
    )
    assert mixfp4.save_compressed_tensors(model, tmp_path / "ct.safetensors")["ignore"] == ["0"]


@pytest.mark.parametrize("scale", [1.0, 1e-3, 300.0])
def test_compressed_tensors_own_nvfp4_decompressor_reads_our_export(tmp_path, scale):
    """compressed-tensors' NVFP4PackedCompressor decodes our file to our weight: bit-identical in
    bf16 (its default dtype); in fp32 within 2 ulp: it rounds ``weight_scale / (1 / s_t)``, then the
    product, where we round ``s_t * weight_scale``, then the product."""
    nvfp4 = pytest.importorskip("compressed_tensors.compressors.nvfp4.base")
    quantization = pytest.importorskip("compressed_tensors.quantization")
    from compressed_tensors.quantization.lifecycle.forward import dequantize as ct_dequantize
    from safetensors.torch import load_file

    model = _ct_mlp()
    with torch.no_grad():
        model[0].weight.mul_(scale)
    mixfp4.quantize_(model, mixfp4.MixFP4WeightOnlyConfig(fmt="nvfp4"))
    path = tmp_path / "ct.safetensors"
    config = mixfp4.save_compressed_tensors(model, path)
    assert quantization.QuantizationConfig.model_validate(config).format == "nvfp4-pack-quantized"
    args = quantization.QuantizationArgs(**config["config_groups"]["group_0"]["weights"])
    scheme = quantization.QuantizationScheme(targets=["Linear"], weights=args)
    raw = load_file(str(path))
    for i in (0, 2):
        local = {k.split(".", 1)[1]: v for k, v in raw.items() if k.startswith(f"{i}.")}
        ours = model[i].dequantize_weight()
        theirs = nvfp4.NVFP4PackedCompressor.decompress(local, scheme)["weight"]
        assert theirs.dtype == torch.bfloat16 and theirs.shape == ours.shape
        assert torch.equal(theirs, ours.bfloat16())
        # fp32: the same decode at full precision, two differently rounded products apart
        q = nvfp4.unpack_fp4_from_uint8(local["weight_packed"], *ours.shape, dtype=torch.float32)
        fp32 = ct_dequantize(
            x_q=q,
            scale=local["weight_scale"].float(),
            args=args,
            global_scale=local["weight_global_scale"],
            dtype=torch.float32,
        )
        ulp = (fp32.view(torch.int32) - ours.view(torch.int32)).abs().max()
        assert int(ulp) <= 2


def test_module_type_cast_is_reported_clearly():
    # Module.type casts integer tensors too: before, decoding raised torch's "cannot view Half as Float"
    model = mixfp4.quantize_(_mlp(), mixfp4.MixFP4WeightOnlyConfig())
    model.type(torch.float16)
    with pytest.raises(TypeError, match=r"Module\.type\(dtype\).*tensor scale is lost"):
        model[0].dequantize_weight()
