"""Tensor-scale conventions: the multiplier (torchao, ModelOpt) and the divisor (compressed-tensors)."""

import mixfp4
import numpy as np
import pytest
import torch
from mixfp4.packed import MX4Packed, unpack_nibbles

ml_dtypes = pytest.importorskip("ml_dtypes")


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _divisor_oracle(x):
    """NVFP4 in compressed-tensors' order, in numpy: g = 448·6 / amax, s_b = E4M3(g · amax_b / 6)
    (torch's float8 cast), q = E2M1(x / (s_b / g)) (ml_dtypes' float4 cast), x̂ = q · (s_b / g)."""
    x = x.numpy().astype(np.float32)
    g = np.float32(448 * 6) / np.float32(np.abs(x).max())
    b = x.reshape(x.shape[0], -1, 16)
    raw = g * (np.abs(b).max(-1) / np.float32(6))
    raw = np.clip(np.where(raw == 0, np.float32(1), raw), np.float32(2.0**-9), np.float32(448))
    s_b = torch.from_numpy(raw.astype(np.float32)).to(torch.float8_e4m3fn)
    combined = (s_b.float().numpy() / g)[..., None]
    q = np.clip(b / combined, -6, 6).astype(ml_dtypes.float4_e2m1fn).astype(np.float32)
    return g, s_b.view(torch.uint8).numpy(), q.reshape(x.shape), (q * combined).reshape(x.shape)


def test_divisor_nvfp4_matches_compressed_tensors_formula():
    x = _randn(12, 64, seed=1) * torch.exp(_randn(12, 1, seed=2) * 2)
    x[0, :16] = 0
    p = mixfp4.quantize_nvfp4(x, tensor_scale_convention="divisor")
    g, scales, q, xhat = _divisor_oracle(x)
    assert p.tensor_scale_convention == "divisor" and float(p.tensor_scale) == float(g)
    assert torch.equal(p.scales, torch.from_numpy(scales))
    assert torch.equal(mixfp4.E2M1.decode(unpack_nibbles(p.codes)), torch.from_numpy(q))
    assert torch.equal(mixfp4.dequantize(p), torch.from_numpy(xhat))


def _power_of_two_blocks(grid, k, seed):
    """Blocks whose maximum is grid · 2^j · 2^-k (j per block): with s_t = 2^-k every block scale
    of the ``grid`` candidate is the power of two 2^j, so both conventions compute exactly."""
    x = _randn(8, 64, seed=seed).clamp(-2, 2)
    j = torch.randint(-3, 4, (8, 4), generator=torch.Generator().manual_seed(seed + 1))
    peak = grid * torch.pow(2.0, (j - k).float())
    blocks = x.reshape(8, 4, 16)
    blocks = blocks / blocks.abs().amax(-1, keepdim=True) * peak.unsqueeze(-1) * 0.999
    blocks[..., 3] = peak * torch.where(j % 2 == 0, 1.0, -1.0)
    return blocks.reshape(8, 64)


@pytest.mark.parametrize(("formats", "grid"), [(("e2m1",), 6.0), (("e1m2",), 7.0)])
def test_conventions_are_bit_identical_where_the_maths_agrees(formats, grid):
    k = 5
    x = _power_of_two_blocks(grid, k, seed=3)
    mult = mixfp4.quantize_mixfp4(x, formats=formats, tensor_scale=2.0**-k)
    div = mixfp4.quantize_mixfp4(
        x, formats=formats, tensor_scale=2.0**k, tensor_scale_convention="divisor"
    )
    assert torch.equal(mult.codes, div.codes) and torch.equal(mult.scales, div.scales)
    assert torch.equal(mixfp4.dequantize(mult), mixfp4.dequantize(div))


def test_same_bytes_decode_identically_in_both_conventions_for_a_power_of_two_scale():
    p = mixfp4.quantize_mixfp4(_randn(16, 64, seed=4), tensor_scale=2.0**-9)
    as_divisor = MX4Packed(
        p.codes,
        p.scales,
        torch.tensor(2.0**9),
        p.shape,
        16,
        "mixfp4",
        tensor_scale_convention="divisor",
    )
    assert torch.equal(mixfp4.dequantize(p), mixfp4.dequantize(as_divisor))
    # a general scale: the two decoders round s_t · s_b and s_b / (1 / s_t) differently
    q = mixfp4.quantize_mixfp4(_randn(16, 64, seed=4))
    other = MX4Packed(
        q.codes, q.scales, 1.0 / q.tensor_scale, q.shape, 16, "mixfp4",
        tensor_scale_convention="divisor",
    )  # fmt: skip
    torch.testing.assert_close(mixfp4.dequantize(other), mixfp4.dequantize(q), rtol=3e-7, atol=0)


def test_divisor_round_trips_and_keeps_the_guarantee(tmp_path):
    x = _randn(32, 128, seed=5) * torch.exp(_randn(32, 1, seed=6))
    p = mixfp4.quantize_mixfp4(x, tensor_scale_convention="divisor")
    nv = mixfp4.quantize_nvfp4(x, tensor_scale_convention="divisor")
    assert torch.equal(p.tensor_scale, nv.tensor_scale)
    err = (mixfp4.dequantize(p) - x).double().square().reshape(-1, 16).sum(-1)
    err_nv = (mixfp4.dequantize(nv) - x).double().square().reshape(-1, 16).sum(-1)
    assert (err <= err_nv).all() and err.sum() < 0.8 * err_nv.sum()
    # same statistics as the multiplier convention, to float rounding
    mult = mixfp4.quantize_mixfp4(x)
    assert abs(p.stats(x)["mse"] / mult.stats(x)["mse"] - 1) < 1e-3
    # requantizing the decoded tensor with the same global scale gives the same bits
    again = mixfp4.quantize_mixfp4(
        mixfp4.dequantize(p), tensor_scale=p.tensor_scale, tensor_scale_convention="divisor"
    )
    assert again.equal(p)
    mixfp4.save_packed(tmp_path / "d.safetensors", {"w": p})
    back = mixfp4.load_packed(tmp_path / "d.safetensors")["w"]
    assert back.tensor_scale_convention == "divisor" and back.equal(p)


def test_old_files_read_as_multiplier_and_bad_conventions_raise():
    p = mixfp4.quantize_nvfp4(_randn(4, 32, seed=7))
    meta = p.metadata()
    meta["tensor_scale_convention"] = "multiplier: x = v * (tensor_scale * block_scale)"  # 0.2.0
    del meta["block_rows"]
    old = MX4Packed.from_parts(p.tensors(), meta)
    assert old.tensor_scale_convention == "multiplier" and old.equal(p)
    with pytest.raises(ValueError, match="tensor_scale_convention must be one of"):
        mixfp4.quantize_nvfp4(_randn(4, 32), tensor_scale_convention="inverse")
    with pytest.raises(ValueError, match="backend='triton' supports 1-D blocks"):
        mixfp4.quantize_nvfp4(_randn(4, 32), tensor_scale_convention="divisor", backend="triton")
    with pytest.raises(ValueError, match="finite positive"):
        mixfp4.quantize_nvfp4(_randn(4, 32), tensor_scale=-3.0, tensor_scale_convention="divisor")


def test_compressed_tensors_decodes_a_divisor_export_bit_identically_in_fp32(tmp_path):
    """A divisor layer is written with its own global scale, so compressed-tensors' fp32 decode,
    ``q · (weight_scale / weight_global_scale)``, is ours bit for bit (the multiplier layer's
    export is only within 2 ulp: test_nn)."""
    pytest.importorskip("compressed_tensors.compressors.nvfp4.base")
    from compressed_tensors.compressors.nvfp4.base import unpack_fp4_from_uint8
    from compressed_tensors.quantization import QuantizationArgs
    from compressed_tensors.quantization.lifecycle.forward import dequantize as ct_dequantize
    from safetensors.torch import load_file

    model = torch.nn.Sequential(torch.nn.Linear(64, 32))
    config = mixfp4.MixFP4WeightOnlyConfig(
        fmt="nvfp4", weight_kwargs={"tensor_scale_convention": "divisor"}
    )
    mixfp4.quantize_(model, config)
    path = tmp_path / "ct.safetensors"
    ct_config = mixfp4.save_compressed_tensors(model, path)
    raw = load_file(str(path))
    ours = model[0].dequantize_weight()
    assert torch.equal(raw["0.weight_global_scale"].reshape(()), model[0].packed.tensor_scale)
    args = QuantizationArgs(**ct_config["config_groups"]["group_0"]["weights"])
    q = unpack_fp4_from_uint8(raw["0.weight_packed"], *ours.shape, dtype=torch.float32)
    theirs = ct_dequantize(
        x_q=q,
        scale=raw["0.weight_scale"].float(),
        args=args,
        global_scale=raw["0.weight_global_scale"],
        dtype=torch.float32,
    )
    assert torch.equal(theirs, ours)
    fresh = mixfp4.load_compressed_tensors(torch.nn.Sequential(torch.nn.Linear(64, 32)), path)
    assert fresh[0].packed.tensor_scale_convention == "divisor"
    assert fresh[0].packed.equal(model[0].packed)
