"""2-D 16x16 weight blocks: an independent tile-by-tile oracle, and where 1-D and 2-D must agree."""

import mixfp4
import numpy as np
import pytest
import torch
from mixfp4.packed import MX4Packed, unpack_nibbles

ml_dtypes = pytest.importorskip("ml_dtypes")


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _e4m3(raw):
    raw = np.where(raw == 0, np.float32(1), raw)  # scale_min="subnormal": zero blocks scale 1
    clamped = np.clip(raw, np.float32(2.0**-9), np.float32(448)).astype(np.float32)
    s_b = torch.from_numpy(np.atleast_1d(clamped))
    s_b = s_b.to(torch.float8_e4m3fn)
    return np.uint8(s_b.view(torch.uint8)[0]), np.float32(s_b.float()[0])


def _tile_oracle(x, formats):
    """Spec 2.3 on each 16x16 tile, in numpy with two explicit loops: the tile's maximum sets its
    scale, each candidate's error is summed over the tile's (up to) 256 values, ties keep E2M1.
    Returns the element codes [R, K], the scale bytes [R, K/16] and the decoded tensor."""
    x = x.numpy().astype(np.float32)
    rows, cols = x.shape
    s_t = np.float32(np.abs(x).max()) / np.float32(448 * 6)
    codes = np.zeros(x.shape, np.uint8)
    scales = np.zeros((rows, cols // 16), np.uint8)
    xhat = np.zeros(x.shape, np.float32)
    for r0 in range(0, rows, 16):
        for c in range(cols // 16):
            t = x[r0 : r0 + 16, 16 * c : 16 * c + 16]
            amax = np.abs(t).max()
            best = None
            for fmt in formats:
                grid = np.float32(6 if fmt == "e2m1" else 7)
                byte, s_b = _e4m3((amax / grid) / s_t)
                y = t * ((np.float32(1) / s_t) / s_b)
                if fmt == "e2m1":
                    q = np.clip(np.abs(y), 0, 6).astype(ml_dtypes.float4_e2m1fn)
                    mag, nib = q.astype(np.float32), q.view(np.uint8)
                else:
                    k = np.round(np.clip(np.abs(y), 0, 7))  # E1M2 codes read as 0..7
                    mag, nib, byte = k.astype(np.float32), k.astype(np.uint8), byte | 0x80
                dec = np.copysign(mag, y) * (s_t * s_b)
                err = ((dec - t).astype(np.float64) ** 2).sum()
                if best is None or err < best[0]:
                    best = (err, byte, nib | (np.signbit(y).astype(np.uint8) << 3), dec)
            _, byte, nib, dec = best
            codes[r0 : r0 + 16, 16 * c : 16 * c + 16] = nib
            scales[r0 : r0 + 16, c] = byte
            xhat[r0 : r0 + 16, 16 * c : 16 * c + 16] = dec
    return codes, scales, xhat


@pytest.mark.parametrize(("fmt", "formats"), [("mixfp4", ("e2m1", "e1m2")), ("nvfp4", ("e2m1",))])
def test_2d_blocks_match_an_independent_tile_oracle(fmt, formats):
    # 40 rows: the last tile has 8; row scales vary so that tiles mix large and small rows.
    x = _randn(40, 96, seed=1) * torch.exp(0.2 * _randn(40, 1, seed=2))
    x[:16] = torch.rand(16, 96, generator=torch.Generator().manual_seed(3)) * 2 - 1  # E1M2 tiles
    x[16:32, :16] = 0  # an all-zero tile
    p = mixfp4.quantize(x, fmt, block_2d=True)
    codes, scales, xhat = _tile_oracle(x, formats)
    assert p.block_rows == 16
    assert torch.equal(p.scales, torch.from_numpy(scales))
    assert torch.equal(unpack_nibbles(p.codes), torch.from_numpy(codes))
    assert torch.equal(mixfp4.dequantize(p), torch.from_numpy(xhat))
    if fmt == "mixfp4":
        flags = p.format_map()
        assert flags[:16].all() and not flags[16:].all()  # uniform tiles take E1M2


def test_2d_equals_1d_where_every_tile_repeats_one_row():
    # Each tile's 16 rows are one row: its maximum is that row's, its error 16x the row's, so
    # every scale and every choice must be the 1-D one.
    base = _randn(3, 64, seed=3) * torch.tensor([[1.0], [30.0], [1e-3]])
    x = base.repeat_interleave(16, dim=0)
    for fmt in ("mixfp4", "nvfp4"):
        two, one = mixfp4.quantize(x, fmt, block_2d=True), mixfp4.quantize(x, fmt)
        assert torch.equal(two.codes, one.codes) and torch.equal(two.scales, one.scales)
        assert torch.equal(mixfp4.dequantize(two), mixfp4.dequantize(one))


def test_2d_differs_from_1d_on_ordinary_weights_and_is_never_worse_than_nvfp4_2d():
    x = _randn(64, 128, seed=4)
    two, one = mixfp4.quantize_mixfp4(x, block_2d=True), mixfp4.quantize_mixfp4(x)
    assert not torch.equal(two.scales, one.scales)  # a negative control for the test above
    nv = mixfp4.quantize_nvfp4(x, block_2d=True)

    def tile_sse(p):
        d = (mixfp4.dequantize(p) - x).double().square()
        return d.reshape(4, 16, 8, 16).sum(dim=(1, 3))

    assert (tile_sse(two) <= tile_sse(nv)).all()
    assert tile_sse(two).sum() < tile_sse(nv).sum()


def test_2d_slices_of_a_3d_tensor_quantize_independently_given_the_tensor_scale():
    x = _randn(2, 20, 48, seed=5)
    s = float(x.abs().amax()) / (448 * 6)
    whole = mixfp4.quantize_mixfp4(x, block_2d=True, tensor_scale=s)
    for i in range(2):
        part = mixfp4.quantize_mixfp4(x[i], block_2d=True, tensor_scale=s)
        assert torch.equal(whole.codes[i], part.codes) and torch.equal(whole.scales[i], part.scales)


def test_2d_container_checks_and_round_trips(tmp_path):
    x = _randn(32, 64, seed=6)
    p = mixfp4.quantize_mixfp4(x, block_2d=True)
    mixfp4.save_packed(tmp_path / "p.safetensors", {"w": p})
    back = mixfp4.load_packed(tmp_path / "p.safetensors")["w"]
    assert back.block_rows == 16 and back.equal(p)
    bad = p.scales.clone()
    bad[3, 0] ^= 1  # one row of a tile disagrees with the others
    with pytest.raises(ValueError, match="scale bytes differ within a 2-D tile"):
        MX4Packed(p.codes, bad, p.tensor_scale, p.shape, 16, "mixfp4", block_rows=16)
    with pytest.raises(ValueError, match="block_rows must be 1 or block_size=16, got 8"):
        MX4Packed(p.codes, p.scales, p.tensor_scale, p.shape, 16, "mixfp4", block_rows=8)
    for bad_rows in (True, 16.0):
        with pytest.raises(TypeError, match="block_rows must be an int"):
            MX4Packed(p.codes, p.scales, p.tensor_scale, p.shape, 16, "mixfp4", block_rows=bad_rows)
    for shape in [(0, 64), (2, 0, 64)]:  # no rows: an empty container, as with 1-D blocks
        empty = mixfp4.quantize_mixfp4(torch.zeros(shape), block_2d=True)
        assert empty.block_rows == 16 and mixfp4.dequantize(empty).shape == shape
    with pytest.raises(ValueError, match="block_2d needs at least 2 dims"):
        mixfp4.quantize_mixfp4(torch.ones(64), block_2d=True)
    with pytest.raises(TypeError, match="block_2d must be a bool"):
        mixfp4.quantize_mixfp4(x, block_2d="yes")
    with pytest.raises(ValueError, match="backend='triton' supports 1-D blocks"):
        mixfp4.quantize_mixfp4(x, block_2d=True, backend="triton")


def test_2d_weights_in_a_model_keep_their_tiles_through_state_dict_and_casts():
    model = torch.nn.Sequential(torch.nn.Linear(64, 48))
    config = mixfp4.MixFP4WeightOnlyConfig(weight_kwargs={"block_2d": True})
    w = model[0].weight.detach().clone()
    mixfp4.quantize_(model, config)
    layer = model[0]
    assert layer.packed.block_rows == 16
    assert layer.packed.equal(mixfp4.quantize_mixfp4(w, block_2d=True))
    before = layer.dequantize_weight()
    model.to(torch.bfloat16)
    assert torch.equal(layer.dequantize_weight(torch.float32), before)


def test_2d_layer_keeps_its_tiles_through_a_compressed_tensors_round_trip(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(64, 48))
    mixfp4.quantize_(model, mixfp4.MixFP4WeightOnlyConfig(weight_kwargs={"block_2d": True}))
    mixfp4.save_compressed_tensors(model, tmp_path / "m.safetensors")
    back = mixfp4.load_compressed_tensors(
        torch.nn.Sequential(torch.nn.Linear(64, 48)), tmp_path / "m.safetensors"
    )
    assert back[0].block_rows == 16 and back[0].packed.equal(model[0].packed)


def test_2d_nan_poisons_its_whole_tile_under_propagate():
    x = _randn(32, 32, seed=7)
    x[5, 20] = float("nan")
    p = mixfp4.quantize_mixfp4(x, block_2d=True, nan_policy="propagate")
    nan = p.nan_blocks()
    assert nan[:16, 1].all() and int(nan.sum()) == 16


def test_2d_bands_of_tiles_equal_one_pass_with_stochastic_rounding(monkeypatch):
    from mixfp4 import quantizers

    x = _randn(2, 50, 64, seed=8)  # two slices, a partial last tile in each

    def run():
        gen = torch.Generator().manual_seed(0)
        return mixfp4.quantize_mixfp4(x, block_2d=True, rounding="stochastic", generator=gen)

    whole = run()
    monkeypatch.setattr(quantizers, "chunk_blocks", lambda n, itemsize=4: 7)  # one tile row a band
    again = run()
    assert again.equal(whole)
    assert torch.equal(mixfp4.dequantize(again), mixfp4.dequantize(whole))
