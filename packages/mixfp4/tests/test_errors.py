"""Bad input gives a clear error (spec section 8)."""

import dataclasses
import warnings

import mixfp4
import pytest
import torch


def _x():
    return torch.randn(4, 32, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize(
    "dtype", [torch.int32, torch.int8, torch.bool, torch.float8_e4m3fn, torch.complex64]
)
def test_non_float_or_fp8_input_is_a_type_error(dtype):
    x = torch.ones(2, 16).to(dtype)
    with pytest.raises(TypeError, match="float16, bfloat16, float32 or float64"):
        mixfp4.quantize_mixfp4(x)


def test_non_tensor_and_scalar_inputs():
    with pytest.raises(TypeError, match=r"torch\.Tensor"):
        mixfp4.quantize_nvfp4([1.0] * 16)
    with pytest.raises(ValueError, match="non-empty last dimension"):
        mixfp4.quantize_nvfp4(torch.tensor(1.0))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_nan_inf_raise_unless_propagate(bad):
    x = _x()
    x[1, 3] = bad
    with pytest.raises(ValueError, match=r"input contains NaN/Inf.*\(1 values\)"):
        mixfp4.quantize_mixfp4(x)
    p = mixfp4.quantize_mixfp4(x, nan_policy="propagate")
    assert int(p.scales[1, 0]) == 0x7F
    with pytest.raises(ValueError, match=r"NaN scale byte.*\(1 blocks\)"):
        mixfp4.dequantize(p)
    out = mixfp4.dequantize(p, nan_policy="propagate")
    assert bool(out[1, :16].isnan().all())
    assert bool(torch.isfinite(out[1, 16:]).all()) and bool(torch.isfinite(out[0]).all())
    # the finite rest is quantized as if the bad block were zero
    clean = x.clone()
    clean[1, :16] = 0
    torch.testing.assert_close(out[0], mixfp4.dequantize(mixfp4.quantize_mixfp4(clean))[0])
    mx = mixfp4.quantize_mxfp4(x, nan_policy="propagate")
    assert int(mx.scales[1, 0]) == 0xFF


def test_block_size_other_than_16_needs_strict_false():
    with pytest.raises(ValueError, match="MixFP4 uses block_size=16, got 32"):
        mixfp4.quantize_mixfp4(_x(), block_size=32)
    with pytest.raises(ValueError, match="NVFP4 uses block_size=16, got 8"):
        mixfp4.quantize_nvfp4(_x(), block_size=8)
    with pytest.warns(UserWarning, match="not MixFP4-compatible"):
        p = mixfp4.quantize_mixfp4(_x(), block_size=8, strict=False)
    assert p.scales.shape == (4, 4)
    with pytest.raises(ValueError, match="MXFP4 uses block_size=32"):
        mixfp4.quantize_mxfp4(_x(), block_size=16)
    with pytest.raises(ValueError, match="even int"):
        mixfp4.quantize_mixfp4(_x(), block_size=7, strict=False)


def test_pad_error_names_the_dimension():
    with pytest.raises(ValueError, match="last dimension 33 is not a multiple of block_size=16"):
        mixfp4.quantize_mixfp4(torch.randn(2, 33), pad="error")


@pytest.mark.parametrize("scale", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_tensor_scale(scale):
    with pytest.raises(ValueError, match="tensor_scale must be a finite positive number"):
        mixfp4.quantize_mixfp4(_x(), tensor_scale=scale)


def test_calibrated_scale_too_small_warns_with_the_count():
    x = _x()
    x[0, :16] *= 1000  # one block far above the calibration
    s_t = float(x[1:].abs().max()) / (448 * 6)
    with pytest.warns(UserWarning, match=r"1 of 8 blocks saturated"):
        p = mixfp4.quantize_nvfp4(x, tensor_scale=s_t)
    assert int(p.scales.max()) == 0x7E  # clamped to 448, never a NaN byte
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mixfp4.quantize_nvfp4(x)  # a computed scale never saturates


def test_unknown_options_list_the_choices():
    with pytest.raises(ValueError, match=r"selector must be one of \('mse', 'mae', 'absmax'\)"):
        mixfp4.quantize_mixfp4(_x(), selector="l2")
    with pytest.raises(ValueError, match="e1m2_mode must be one of"):
        mixfp4.quantize_mixfp4(_x(), e1m2_mode="float")
    with pytest.raises(ValueError, match="rounding must be one of"):
        mixfp4.quantize_mixfp4(_x(), rounding="up")
    with pytest.raises(ValueError, match="scale_min must be one of"):
        mixfp4.quantize_nvfp4(_x(), scale_min="zero")
    with pytest.raises(ValueError, match="formats must be a non-empty subset"):
        mixfp4.quantize_mixfp4(_x(), formats=("e2m1", "e3m0"))
    with pytest.raises(ValueError, match="fmt must be one of"):
        mixfp4.quantize(_x(), "int4")
    with pytest.raises(ValueError, match="nan_policy must be one of"):
        mixfp4.quantize_mixfp4(_x(), nan_policy="ignore")


def test_mismatched_packed_shapes_and_nan_bytes_on_decode():
    p = mixfp4.quantize_mixfp4(_x())
    with pytest.raises(ValueError, match="packed shapes do not match"):
        dataclasses.replace(p, codes=p.codes[:, :-1])
    with pytest.raises(ValueError, match="packed shapes do not match"):
        dataclasses.replace(p, shape=(4, 48))
    with pytest.raises(TypeError, match="codes must be a uint8 tensor"):
        dataclasses.replace(p, codes=p.codes.float())
    bad = p.scales.clone()
    bad[0, 0] = 0xFF
    with pytest.raises(ValueError, match="NaN scale byte"):
        mixfp4.dequantize(dataclasses.replace(p, scales=bad))
    flagged = p.scales | 0x80
    with pytest.raises(ValueError, match="NVFP4 tensor has scale bytes with bit 7 set"):
        dataclasses.replace(p, fmt="nvfp4", scales=flagged)
    with pytest.raises(TypeError, match="MX4Packed"):
        mixfp4.dequantize(_x())


# ---------------------------------------------------------------------------------------------
# 0.2: the container's tensor scale, argument types, underflow
# ---------------------------------------------------------------------------------------------
def _parts():
    p = mixfp4.quantize_mixfp4(_x())
    return {
        "codes": p.codes,
        "scales": p.scales,
        "shape": p.shape,
        "block_size": 16,
        "fmt": "mixfp4",
    }


@pytest.mark.parametrize("value", [float("nan"), -0.5, 0.0, float("inf")])
def test_packed_rejects_a_nan_negative_or_zero_tensor_scale(value):
    with pytest.raises(ValueError, match=r"tensor_scale must be a finite positive number, got"):
        mixfp4.MX4Packed(tensor_scale=torch.tensor(value), **_parts())


def test_packed_rejects_a_non_float32_or_multi_element_tensor_scale():
    with pytest.raises(TypeError, match=r"float32 tensor, got torch.float16"):
        mixfp4.MX4Packed(tensor_scale=torch.tensor(0.01, dtype=torch.float16), **_parts())
    with pytest.raises(TypeError, match=r"of shape \(2,\)"):
        mixfp4.MX4Packed(tensor_scale=torch.ones(2), **_parts())
    with pytest.raises(TypeError, match="got float"):
        mixfp4.MX4Packed(tensor_scale=0.01, **_parts())


@pytest.mark.parametrize(
    ("scale", "match"),
    [
        (torch.ones(2), r"tensor_scale must be .* shape \(2,\)"),
        ("abc", r"tensor_scale must be .* got str 'abc'"),
        (True, r"tensor_scale must be .* got bool"),
        (torch.tensor(3), r"tensor_scale must be .* torch.int64"),
    ],
)
def test_quantizer_tensor_scale_of_the_wrong_type_is_named(scale, match):
    with pytest.raises(TypeError, match=match):
        mixfp4.quantize_mixfp4(_x(), tensor_scale=scale)


def test_a_calibrated_scale_that_flushes_every_block_to_zero_warns():
    x = _x()
    with pytest.warns(UserWarning, match=r"all 8 non-zero blocks underflowed to zero"):
        p = mixfp4.quantize_nvfp4(x, tensor_scale=1e6)
    assert not mixfp4.dequantize(p).any()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mixfp4.quantize_nvfp4(x, tensor_scale=float(x.abs().max()) / 2688)
        mixfp4.quantize_nvfp4(torch.zeros(2, 16), tensor_scale=1.0)  # nothing to flush


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool])
def test_dequantize_to_an_integer_dtype_is_a_type_error(dtype):
    packed = mixfp4.quantize_mixfp4(_x())
    with pytest.raises(TypeError, match="float16, bfloat16, float32 or float64, got torch"):
        mixfp4.dequantize(packed, dtype)


def test_dequantize_dtype_given_as_a_string_is_named():
    with pytest.raises(TypeError, match=r"torch\.dtype such as torch\.float16, got str 'float16'"):
        mixfp4.dequantize(mixfp4.quantize_mixfp4(_x()), "float16")


@pytest.mark.parametrize("cfg", [mixfp4.MixFP4WeightOnlyConfig(), mixfp4.MixFP4QATConfig()])
def test_quantized_layers_refuse_integer_inputs_as_nn_linear_does(cfg):
    model = mixfp4.quantize_(torch.nn.Sequential(torch.nn.Linear(32, 8)), cfg)
    with pytest.raises((TypeError, RuntimeError)):
        torch.nn.Linear(32, 8)(torch.ones(2, 32, dtype=torch.long))  # the reference behaviour
    with pytest.raises((TypeError, RuntimeError), match=r"float|Long"):
        model(torch.ones(2, 32, dtype=torch.long))


def test_config_selector_and_bare_linear_root_are_refused():
    with pytest.raises(ValueError, match="selector must be one of"):
        mixfp4.MixFP4WeightOnlyConfig(selector="bogus")
    with pytest.raises(TypeError, match="bare Linear"):
        mixfp4.quantize_(torch.nn.Linear(16, 16))


def test_packed_container_block_size_type_devices_and_formats_none():
    p = mixfp4.quantize_mixfp4(_x())
    fields = dict(codes=p.codes, scales=p.scales, tensor_scale=p.tensor_scale, shape=p.shape)
    with pytest.raises(TypeError, match="block_size must be an int, got float"):
        mixfp4.MX4Packed(**fields, block_size=16.0, fmt="mixfp4")
    fields["codes"] = p.codes.to("meta")
    with pytest.raises(ValueError, match="one device"):
        mixfp4.MX4Packed(**fields, block_size=16, fmt="mixfp4")
    with pytest.raises(TypeError, match="formats must be a sequence"):
        mixfp4.quantize_mixfp4(_x(), formats=None)
