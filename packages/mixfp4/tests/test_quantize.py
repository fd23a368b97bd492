"""Quantizers against independent formulas (ml_dtypes casts), the MixFP4 guarantee and edge cases."""

import math

import mixfp4
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from mixfp4.packed import pack_nibbles, unpack_nibbles
from mixfp4.quantizers import block_error

ml_dtypes = pytest.importorskip("ml_dtypes")


def _randn(*shape, seed=0, scale=1.0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale


def _blocks(t, bs=16):
    return t.reshape(*t.shape[:-1], -1, bs)


# ---------------------------------------------------------------------------------------------
# NVFP4 and MXFP4 against the published formulas, computed with other casts
# ---------------------------------------------------------------------------------------------
def _nvfp4_oracle(x, lo):
    """NVFP4 in numpy: torch's float8 cast for scales, ml_dtypes' float4 cast for elements."""
    x = x.numpy().astype(np.float32)
    s_t = np.float32(np.abs(x).max()) / np.float32(448 * 6)
    b = x.reshape(x.shape[0], -1, 16)
    raw = (np.abs(b).max(-1) / np.float32(6)) / s_t
    if lo == 2.0**-9:
        raw = np.where(raw == 0, np.float32(1), raw)
    raw = np.clip(raw, np.float32(lo), np.float32(448)).astype(np.float32)
    s_b = torch.from_numpy(raw).to(torch.float8_e4m3fn)
    s_b_bytes = s_b.view(torch.uint8).numpy()
    s_b32 = s_b.float().numpy()
    total = (s_t * s_b32)[..., None]
    reciprocal = ((np.float32(1) / s_t) / s_b32)[..., None]
    q = np.clip(b * reciprocal, -6, 6).astype(ml_dtypes.float4_e2m1fn)
    return q.astype(np.float32).reshape(x.shape), s_b_bytes, (q.astype(np.float32) * total)


@pytest.mark.parametrize(("scale_min", "lo"), [("subnormal", 2.0**-9), ("normal", 2.0**-6)])
def test_nvfp4_matches_the_torchao_modelopt_formula(scale_min, lo):
    x = _randn(12, 64, seed=3) * torch.exp(_randn(12, 1, seed=4) * 2)
    x[0, :16] = 0  # an all-zero block
    x[1, :16] = 1e-6 * x[1, :16]  # a block far below the tensor's range
    p = mixfp4.quantize_nvfp4(x, scale_min=scale_min)
    q_ref, bytes_ref, xhat_ref = _nvfp4_oracle(x, lo)
    assert torch.equal(p.scales, torch.from_numpy(bytes_ref))
    codes = unpack_nibbles(p.codes)
    torch.testing.assert_close(mixfp4.E2M1.decode(codes), torch.from_numpy(q_ref), rtol=0, atol=0)
    torch.testing.assert_close(
        mixfp4.dequantize(p), torch.from_numpy(xhat_ref.reshape(x.shape)), rtol=0, atol=0
    )


# torchao is in the `peers` extra only: the `peers_mixfp4` nox session (a GitHub job) installs it.
@pytest.mark.slow
def test_nvfp4_bit_exact_with_torchao_when_installed():
    nvfp4 = pytest.importorskip("torchao.prototype.mx_formats.nvfp4_tensor")
    x = _randn(64, 256, seed=5) * torch.exp(_randn(64, 1, seed=6) * 2)
    s_t = nvfp4.per_tensor_amax_to_scale(x.abs().amax())
    scales, data = nvfp4.nvfp4_quantize(x, 16, s_t)
    p = mixfp4.quantize_nvfp4(x, tensor_scale=s_t, scale_min="normal")
    assert torch.equal(p.scales, scales.view(torch.uint8).reshape(p.scales.shape))
    assert torch.equal(p.codes, data.view(torch.uint8).reshape(p.codes.shape))


def _e4m3_scale_oracle(raw, lo):
    """Scale bytes and values: the spec's clamp, then torch's float8 cast (not our encoder)."""
    if lo == 2.0**-9:
        raw = np.where(raw == 0, np.float32(1), raw)
    s_b = torch.from_numpy(np.clip(raw, np.float32(lo), np.float32(448)).astype(np.float32))
    s_b = s_b.to(torch.float8_e4m3fn)
    return s_b.view(torch.uint8).numpy(), s_b.float().numpy()


def _mixfp4_oracle(x, e1m2_mode, selector):
    """Spec 2.3 in numpy, block by block: E2M1 candidate through ml_dtypes' float4 cast, E1M2
    candidate as np.round (half to even) integers, the error on the decoded values, ties -> E2M1."""
    x = x.numpy().astype(np.float32)
    b = x.reshape(x.shape[0], -1, 16)
    amax = np.abs(b).max(-1)
    grid_b, mult = (np.float32(7), 4) if e1m2_mode == "int" else (np.float32(1.75), 1)
    s_t = np.float32(np.abs(x).max()) / np.float32(448 * (6 if e1m2_mode == "int" else 1.75))
    cands = []
    for grid in (np.float32(6), grid_b):
        byte, s_b = _e4m3_scale_oracle((amax / grid) / s_t, 2.0**-9)
        y = np.clip(b * ((np.float32(1) / s_t) / s_b)[..., None], -grid, grid)
        if grid == 6:
            mag = np.abs(y).astype(ml_dtypes.float4_e2m1fn).astype(np.float32)
            nibble = np.abs(y).astype(ml_dtypes.float4_e2m1fn).view(np.uint8)
        else:
            mag = np.round(np.abs(y) * (4 / mult)) / (4 / mult)
            nibble = np.round(np.abs(y) * (4 / mult)).astype(np.uint8)
        xhat = np.copysign(mag, y) * (s_t * s_b)[..., None]
        d = (xhat - b).astype(np.float64)
        err = {"mse": (d * d).sum(-1), "mae": np.abs(d).sum(-1), "absmax": np.abs(d).max(-1)}
        cands.append((byte, nibble | (np.signbit(y).astype(np.uint8) << 3), err[selector]))
    (byte_a, code_a, err_a), (byte_b, code_b, err_b) = cands
    pick = err_b < err_a
    codes = np.where(pick[..., None], code_b, code_a).reshape(x.shape)
    return codes, np.where(pick, byte_b | 0x80, byte_a)


@pytest.mark.parametrize(
    ("e1m2_mode", "selector"), [("int", "mse"), ("int", "mae"), ("frac", "absmax")]
)
def test_mixfp4_matches_an_independent_oracle(e1m2_mode, selector):
    x = _randn(24, 128, seed=30) * torch.exp(_randn(24, 1, seed=31) * 2)
    x[0, :16] = 0
    p = mixfp4.quantize_mixfp4(x, e1m2_mode=e1m2_mode, selector=selector)
    codes, scales = _mixfp4_oracle(x, e1m2_mode, selector)
    assert torch.equal(p.scales, torch.from_numpy(scales))
    assert torch.equal(unpack_nibbles(p.codes), torch.from_numpy(codes))
    assert 0.2 < float(p.format_map().float().mean()) < 0.9


def _mx_oracle(x, bs=32):
    """OCP MX v1.0 in plain Python per block: floor(log2 amax) - emax(E2M1)=2, saturating RNE."""
    x = x.numpy().astype(np.float32)
    b = x.reshape(x.shape[0], -1, bs)
    exps = np.zeros(b.shape[:2], dtype=np.int64)
    for i in range(b.shape[0]):
        for j in range(b.shape[1]):
            amax = float(np.abs(b[i, j]).max())
            e = -127 if amax == 0 else math.frexp(amax)[1] - 1 - 2
            exps[i, j] = max(-127, min(127, e))
    scale = np.ldexp(np.float32(1), exps).astype(np.float32)[..., None]
    q = np.clip(b / scale, -6, 6).astype(ml_dtypes.float4_e2m1fn).astype(np.float32)
    scale_bytes = np.ldexp(1.0, exps).astype(ml_dtypes.float8_e8m0fnu).view(np.uint8)
    return (q * scale).reshape(x.shape), scale_bytes


def test_mxfp4_matches_the_ocp_formula():
    x = _randn(6, 96, seed=6) * torch.exp(_randn(6, 1, seed=7))
    x[2, :32] = 0
    p = mixfp4.quantize_mxfp4(x)
    xhat_ref, bytes_ref = _mx_oracle(x)
    assert torch.equal(p.scales, torch.from_numpy(bytes_ref))
    torch.testing.assert_close(mixfp4.dequantize(p), torch.from_numpy(xhat_ref), rtol=0, atol=0)
    assert p.bits_per_element == 4.25


def test_mxfp4_ceil_scale_never_clips():
    x = _randn(4, 64, seed=8)
    p = mixfp4.quantize_mxfp4(x, scale_rounding="ceil")
    scale = p.block_scales().repeat_interleave(32, dim=-1)
    assert bool((x.abs() <= 6 * scale).all())
    floor = mixfp4.quantize_mxfp4(x)
    assert bool((p.scales >= floor.scales).all())


# ---------------------------------------------------------------------------------------------
# MixFP4: the guarantee, the selector, the flag
# ---------------------------------------------------------------------------------------------
def _per_block_sse(x, packed):
    return _blocks((mixfp4.dequantize(packed).double() - x.double()).square()).sum(-1)


@settings(max_examples=60, deadline=None)
@given(
    data=arrays(
        np.float32,
        st.tuples(st.integers(1, 3), st.sampled_from([16, 32, 48])),
        elements=st.floats(-1e4, 1e4, width=32, allow_nan=False, allow_infinity=False),
    ),
    log_scale=st.floats(-20, 20),
)
def test_mixfp4_block_error_never_exceeds_nvfp4(data, log_scale):
    x = torch.from_numpy(data) * math.exp(log_scale)
    mix = mixfp4.quantize_mixfp4(x)
    nv = mixfp4.quantize_nvfp4(x)
    assert torch.equal(mix.tensor_scale, nv.tensor_scale)
    err_mix, err_nv = _per_block_sse(x, mix), _per_block_sse(x, nv)
    assert bool((err_mix <= err_nv).all())
    assert float(err_mix.sum()) <= float(err_nv.sum())
    # the other selectors keep the guarantee for their own metric
    for selector in ("mae", "absmax"):
        other = mixfp4.quantize_mixfp4(x, selector=selector)
        err = {
            k: block_error(_blocks(mixfp4.dequantize(p)) - _blocks(x), selector)
            for k, p in (("mix", other), ("nv", nv))
        }
        assert bool((err["mix"] <= err["nv"]).all())


@pytest.mark.parametrize("selector", ["mse", "mae", "absmax"])
def test_selector_picks_the_candidate_with_the_smaller_error(selector):
    x = _randn(16, 128, seed=9) * torch.exp(_randn(16, 1, seed=10))
    mix = mixfp4.quantize_mixfp4(x, selector=selector)
    a = mixfp4.quantize_mixfp4(x, formats=("e2m1",))
    b = mixfp4.quantize_mixfp4(x, formats=("e1m2",))
    err = {
        k: block_error(_blocks(mixfp4.dequantize(p)) - _blocks(x), selector)
        for k, p in (("a", a), ("b", b))
    }
    assert torch.equal(mix.format_map(), err["b"] < err["a"])
    assert 0 < float(mix.format_map().float().mean()) < 1
    chosen = torch.where(mix.format_map(), err["b"], err["a"])
    got = block_error(_blocks(mixfp4.dequantize(mix)) - _blocks(x), selector)
    torch.testing.assert_close(got, chosen, rtol=0, atol=0)


def test_flag_bit_semantics_and_no_nan_bytes():
    x = _randn(32, 256, seed=11) * torch.exp(_randn(32, 1, seed=12) * 3)
    mix = mixfp4.quantize_mixfp4(x)
    assert torch.equal(mix.format_map(), (mix.scales & 0x80) != 0)
    assert not bool(((mix.scales & 0x7F) == 0x7F).any())
    nv = mixfp4.quantize_nvfp4(x)
    assert bool((nv.scales < 0x80).all())
    e2m1_only = mixfp4.quantize_mixfp4(x, formats=("e2m1",))
    assert torch.equal(e2m1_only.scales, nv.scales) and torch.equal(e2m1_only.codes, nv.codes)
    # A flagged block decodes as integers times its (flag-stripped) scale.
    blk = mix.format_map().nonzero()[0]
    vals = mixfp4.dequantize(mix)[blk[0], blk[1] * 16 : (blk[1] + 1) * 16]
    unit = mix.tensor_scale * mix.block_scales()[blk[0], blk[1]]
    ints = vals / unit
    torch.testing.assert_close(ints, ints.round(), rtol=0, atol=1e-5)
    assert float(ints.abs().max()) <= 7


def test_requantizing_the_dequantized_tensor_is_idempotent():
    x = _randn(16, 128, seed=13)
    p1 = mixfp4.quantize_mixfp4(x)
    y = mixfp4.dequantize(p1)
    p2 = mixfp4.quantize_mixfp4(y, tensor_scale=p1.tensor_scale)
    assert torch.equal(p2.scales, p1.scales) and torch.equal(p2.codes, p1.codes)
    torch.testing.assert_close(mixfp4.dequantize(p2), y, rtol=0, atol=0)


def test_exact_grid_blocks_select_their_format_with_zero_error():
    c = 0.5  # a power of two, so the block scale is exact in E4M3
    int_block = c * torch.tensor([-7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 5.0])
    fp_block = c * torch.tensor([-6, -4, -3, -2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 2, 3, 4, 6, 0])
    x = torch.stack([int_block, fp_block, torch.zeros(16)])
    p = mixfp4.quantize_mixfp4(x, tensor_scale=1.0)
    assert p.format_map()[:, 0].tolist() == [True, False, False]  # the zero block ties -> E2M1
    torch.testing.assert_close(mixfp4.dequantize(p), x, rtol=0, atol=0)


def test_frac_mode_keeps_the_guarantee_with_a_shared_tensor_scale():
    x = _randn(8, 128, seed=14)
    frac = mixfp4.quantize_mixfp4(x, e1m2_mode="frac")
    assert math.isclose(float(frac.tensor_scale), float(x.abs().max()) / (448 * 1.75), rel_tol=1e-6)
    nv = mixfp4.quantize_nvfp4(x, tensor_scale=frac.tensor_scale)
    assert bool((_per_block_sse(x, frac) <= _per_block_sse(x, nv)).all())
    assert frac.stats(x)["e1m2_fraction"] > 0.3


def test_pure_e1m2_beats_nvfp4_on_uniform_and_loses_on_heavy_tails():
    uniform = torch.rand(64, 256, generator=torch.Generator().manual_seed(15)) * 2 - 1
    g = torch.Generator().manual_seed(16)
    chi2 = torch.randn(2, 64, 256, generator=g).square().sum(0)
    heavy = torch.randn(64, 256, generator=g) / torch.sqrt(chi2 / 2)  # Student-t, 2 dof
    for x, better in ((uniform, True), (heavy, False)):
        int4 = mixfp4.quantize_mixfp4(x, formats=("e1m2",)).stats(x)["mse"]
        nv = mixfp4.quantize_nvfp4(x).stats(x)["mse"]
        assert (int4 < nv) is better


# ---------------------------------------------------------------------------------------------
# edge cases
# ---------------------------------------------------------------------------------------------
def test_all_zero_tensor():
    for fn in (mixfp4.quantize_mixfp4, mixfp4.quantize_nvfp4, mixfp4.quantize_mxfp4):
        p = fn(torch.zeros(3, 64))
        assert not bool(p.codes.any())
        assert float(p.tensor_scale) == 1.0
        out = mixfp4.dequantize(p)
        assert bool((out == 0).all()) and bool(torch.isfinite(out).all())


def test_tensors_without_rows():
    for fn in (mixfp4.quantize_mixfp4, mixfp4.quantize_nvfp4, mixfp4.quantize_mxfp4):
        p = fn(torch.zeros(0, 40))
        assert p.codes.shape[0] == 0 and mixfp4.dequantize(p).shape == (0, 40)
    q = mixfp4.quantize_mixfp4(torch.ones(3, 40))
    assert mixfp4.mixfp4_mm(mixfp4.quantize_mixfp4(torch.zeros(0, 40)), q).shape == (0, 3)


def test_single_nonzero_element_is_reproduced():
    x = torch.zeros(2, 32)
    x[1, 7] = -3.7
    for fn in (mixfp4.quantize_mixfp4, mixfp4.quantize_nvfp4):
        out = mixfp4.dequantize(fn(x))
        assert math.isclose(float(out[1, 7]), -3.7, rel_tol=1e-6)
        out[1, 7] = 0
        assert not bool(out.any())


@pytest.mark.parametrize("shape", [(3, 33), (1, 16), (5, 1), (2, 3, 40)])
def test_padded_tail_equals_quantizing_the_padded_tensor(shape):
    x = _randn(*shape, seed=16)
    pad = (-shape[-1]) % 16
    xp = torch.nn.functional.pad(x, (0, pad))
    p, pp = mixfp4.quantize_mixfp4(x), mixfp4.quantize_mixfp4(xp)
    assert torch.equal(p.codes, pp.codes) and torch.equal(p.scales, pp.scales)
    out = mixfp4.dequantize(p)
    assert out.shape == x.shape
    torch.testing.assert_close(out, mixfp4.dequantize(pp)[..., : shape[-1]], rtol=0, atol=0)


def test_pack_nibbles_puts_the_even_element_low_on_both_paths():
    codes = torch.randint(
        0, 16, (40, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(0)
    )
    strided = codes.T  # not contiguous: the slicing path
    expected = torch.tensor(
        [[int(r[j]) | int(r[j + 1]) << 4 for j in range(0, 40, 2)] for r in strided.tolist()],
        dtype=torch.uint8,
    )
    assert torch.equal(pack_nibbles(strided), expected)
    assert torch.equal(pack_nibbles(strided.contiguous()), expected)  # the int16 path
    assert torch.equal(unpack_nibbles(expected), strided)


def test_dtypes_and_float64_input():
    x = _randn(4, 32, seed=17)
    ref = mixfp4.quantize_mixfp4(x)
    assert mixfp4.quantize_mixfp4(x.double()).equal(ref)
    out = mixfp4.dequantize(mixfp4.quantize_mixfp4(x.bfloat16()), torch.bfloat16)
    assert out.dtype == torch.bfloat16


def test_stochastic_rounding_is_unbiased_and_lands_on_neighbours():
    x = torch.full((1, 16), 0.3)
    x[0, 0] = 6.0  # fixes the block scale at 1 · s_t
    g = torch.Generator().manual_seed(18)
    outs = torch.stack(
        [
            mixfp4.dequantize(
                mixfp4.quantize_nvfp4(x, tensor_scale=1.0, rounding="stochastic", generator=g)
            )
            for _ in range(400)
        ]
    )
    assert set(outs[:, 0, 1:].unique().tolist()) == {0.0, 0.5}
    assert abs(float(outs[:, 0, 1:].mean()) - 0.3) < 0.02
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    a = mixfp4.quantize_mixfp4(_randn(4, 32), rounding="stochastic", generator=g1)
    b = mixfp4.quantize_mixfp4(_randn(4, 32), rounding="stochastic", generator=g2)
    assert a.equal(b)


def test_mixfp4_mm_equals_dequantize_then_matmul():
    a = mixfp4.quantize_mixfp4(_randn(7, 80, seed=19))
    b = mixfp4.quantize_mixfp4(_randn(5, 80, seed=20) * 0.01)
    assert 0 < float(a.format_map().float().mean()) < 1
    got = mixfp4.mixfp4_mm(a, b)
    expected = mixfp4.dequantize(a).double() @ mixfp4.dequantize(b).double().T
    bound = mixfp4.dequantize(a).double().abs() @ mixfp4.dequantize(b).double().abs().T
    assert bool(((got.double() - expected).abs() <= 1e-6 * bound).all())
    # and through the frac mode and against NVFP4 / MXFP4 operands
    c = mixfp4.quantize_mixfp4(_randn(3, 64, seed=21), e1m2_mode="frac")
    d = mixfp4.quantize_nvfp4(_randn(4, 64, seed=22))
    e, f = (mixfp4.quantize_mxfp4(_randn(n, 64, seed=n)) for n in (2, 6))
    for u, v in ((c, d), (e, f)):
        torch.testing.assert_close(
            mixfp4.mixfp4_mm(u, v),
            mixfp4.dequantize(u) @ mixfp4.dequantize(v).T,
            rtol=1e-5,
            atol=1e-5,
        )
    with pytest.raises(ValueError, match="inner dimensions differ"):
        mixfp4.mixfp4_mm(c, e)


# ---------------------------------------------------------------------------------------------
# 0.2: the float32 selection, the module name, formats as a string, chunking
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("selector", ["mse", "mae", "absmax"])
def test_float32_selection_equals_the_float64_decision(selector):
    from mixfp4.quantizers import pick_e1m2

    g = torch.Generator().manual_seed(21)
    da = torch.randn(4096, 16, generator=g) * torch.exp(torch.randn(4096, 1, generator=g) * 20)
    db = da[torch.randperm(4096, generator=g)].clone()
    db[:1024] = da[:1024].flip(-1)  # exact ties summed in another order
    db[1024:2048] = da[1024:2048] * (1 + 2.0**-22)  # within float32 rounding of a tie
    db[2048:2100] = torch.finfo(torch.float32).max / 4  # squares overflow float32
    want = block_error(db, selector) < block_error(da, selector)
    assert torch.equal(pick_e1m2(da, db, selector), want)


def test_quantize_function_and_quantizers_module_do_not_shadow():
    import importlib
    import types

    assert callable(mixfp4.quantize) and not isinstance(mixfp4.quantize, types.ModuleType)
    module = importlib.import_module("mixfp4.quantizers")
    assert module.quantize is mixfp4.quantize
    assert mixfp4.quantize is importlib.import_module("mixfp4").quantize  # still the function


def test_formats_as_a_single_string():
    x = _randn(8, 64, seed=5)
    assert mixfp4.quantize_mixfp4(x, formats="e1m2").equal(
        mixfp4.quantize_mixfp4(x, formats=("e1m2",))
    )
    assert bool(mixfp4.quantize_mixfp4(x, formats="e1m2").format_map().all())
    with pytest.raises(ValueError, match="formats must be"):
        mixfp4.quantize_mixfp4(x, formats="e2m3")


def test_chunked_reference_equals_one_pass(monkeypatch):
    from mixfp4 import quantizers

    x = _randn(40, 160, seed=6) * torch.exp(_randn(40, 1, seed=7))
    whole = {
        k: mixfp4.quantize_mixfp4(
            x, selector=k, rounding="stochastic", generator=torch.Generator().manual_seed(0)
        )
        for k in mixfp4.SELECTORS
    }
    decoded = {k: mixfp4.dequantize(p) for k, p in whole.items()}
    monkeypatch.setattr(quantizers, "chunk_blocks", lambda n, itemsize=4: 7)
    for k, p in whole.items():
        again = mixfp4.quantize_mixfp4(
            x, selector=k, rounding="stochastic", generator=torch.Generator().manual_seed(0)
        )
        assert again.equal(p)
        assert torch.equal(mixfp4.dequantize(again), decoded[k])  # one row per decode chunk


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("fmt", ["mixfp4", "nvfp4", "mxfp4"])
def test_any_float_input_quantizes_as_its_float32_cast(monkeypatch, dtype, fmt):
    # The quantizers cast chunk by chunk (no whole float32 copy): the bits must not change.
    from mixfp4 import quantizers

    monkeypatch.setattr(quantizers, "chunk_blocks", lambda n, itemsize=4: 5)
    x = (_randn(24, 96, seed=8) * torch.exp(_randn(24, 1, seed=9))).to(dtype)
    assert mixfp4.quantize(x, fmt).equal(mixfp4.quantize(x.float(), fmt))


def test_chunked_mm_equals_one_einsum():
    g = torch.Generator().manual_seed(3)
    a = mixfp4.quantize_mixfp4(torch.randn(37, 96, generator=g))
    b = mixfp4.quantize_mixfp4(torch.randn(300, 96, generator=g))
    got = mixfp4.mixfp4_mm(a, b)
    from mixfp4.datapath import to_e2m2
    from mixfp4.formats import E2M2

    (ca, ma), (cb, mb) = to_e2m2(a), to_e2m2(b)
    va, vb = E2M2.decode(ca).reshape(37, 6, 16), E2M2.decode(cb).reshape(300, 6, 16)
    partial = torch.einsum("mkb,nkb->mnk", va, vb) * (ma.unsqueeze(1) * mb.unsqueeze(0))
    want = partial.sum(-1) * (a.tensor_scale * b.tensor_scale)
    assert torch.equal(got, want)
