"""Value tables and code encode/decode against ml_dtypes and torch's float8 type."""

import numpy as np
import pytest
import torch
from mixfp4.datapath import e1m2_to_e2m2, e2m1_to_e2m2
from mixfp4.formats import E1M2, E2M1, E2M2, E4M3, E8M0, get_format

ml_dtypes = pytest.importorskip("ml_dtypes")


def test_e2m1_table_matches_ml_dtypes_for_all_16_codes():
    expected = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float32)
    torch.testing.assert_close(E2M1.table, torch.from_numpy(expected), rtol=0, atol=0)


def test_e4m3_table_matches_ml_dtypes_and_torch_for_all_256_bytes():
    bytes_ = np.arange(256, dtype=np.uint8)
    ml = torch.from_numpy(bytes_.view(ml_dtypes.float8_e4m3fn).astype(np.float32))
    th = torch.from_numpy(bytes_).view(torch.float8_e4m3fn).float()
    ours = E4M3.table
    assert torch.equal(ours.isnan(), ml.isnan()) and torch.equal(ours.isnan(), th.isnan())
    assert ours.isnan().nonzero().flatten().tolist() == [0x7F, 0xFF]
    finite = ~ours.isnan()
    torch.testing.assert_close(ours[finite], ml[finite], rtol=0, atol=0)
    torch.testing.assert_close(ours[finite], th[finite], rtol=0, atol=0)
    assert E4M3.max == 448.0
    assert float(E4M3.table[1]) == 2.0**-9 and float(E4M3.table[8]) == 2.0**-6


def test_e2m2_table_is_the_even_mantissa_half_of_ml_dtypes_e2m3():
    # E2M2 code s e1 e0 m1 m0 is the E2M3 code s e1 e0 m1 m0 0 (same bias 1).
    codes = np.arange(32, dtype=np.uint8)
    e2m3 = (codes << 1).astype(np.uint8).view(ml_dtypes.float6_e2m3fn).astype(np.float32)
    torch.testing.assert_close(E2M2.table, torch.from_numpy(e2m3), rtol=0, atol=0)
    assert E2M2.max == 7.0


def test_e1m2_is_the_uniform_quarter_grid():
    torch.testing.assert_close(E1M2.magnitudes, torch.arange(8) / 4.0, rtol=0, atol=0)
    assert E1M2.max == 1.75


def test_e8m0_matches_ml_dtypes_for_all_256_bytes():
    bytes_ = np.arange(256, dtype=np.uint8)
    ml = bytes_.view(ml_dtypes.float8_e8m0fnu).astype(np.float64)
    ours = E8M0.decode(torch.from_numpy(bytes_)).double().numpy()
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(ml))
    # 2^-127 is subnormal in float32 but exact; compare the finite values exactly.
    np.testing.assert_array_equal(ours[:255], ml[:255])


def test_every_4bit_grid_embeds_exactly_in_e2m2():
    e2m2 = set(E2M2.table.tolist())
    assert set(E2M1.table.tolist()) <= e2m2
    assert set(E1M2.table.tolist()) <= e2m2
    assert set(range(-7, 8)) <= e2m2  # the integer view of E1M2
    codes = torch.arange(16, dtype=torch.uint8)
    torch.testing.assert_close(E2M2.decode(e2m1_to_e2m2(codes)), E2M1.decode(codes), rtol=0, atol=0)
    torch.testing.assert_close(E2M2.decode(e1m2_to_e2m2(codes)), E1M2.decode(codes), rtol=0, atol=0)


TIES = [(0.25, 0.0), (0.75, 1.0), (1.25, 1.0), (1.75, 2.0), (2.5, 2.0), (3.5, 4.0), (5.0, 4.0)]


@pytest.mark.parametrize(("value", "expected"), TIES)
def test_e2m1_ties_round_to_even(value, expected):
    for sign in (1.0, -1.0):
        code = E2M1.encode(torch.tensor([sign * value]))
        assert float(E2M1.decode(code)) == sign * expected


def test_e2m1_saturates():
    codes = E2M1.encode(torch.tensor([100.0, -100.0, 6.0, -6.0]))
    assert E2M1.decode(codes).tolist() == [6.0, -6.0, 6.0, -6.0]


def test_e2m1_encode_matches_ml_dtypes_cast():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(20000, generator=g) * 3
    mids = (E2M1.magnitudes[1:] + E2M1.magnitudes[:-1]) / 2
    x = torch.cat([x, mids, -mids, E2M1.magnitudes]).clamp(-6, 6)
    ml = x.numpy().astype(ml_dtypes.float4_e2m1fn).astype(np.float32)
    torch.testing.assert_close(E2M1.decode(E2M1.encode(x)), torch.from_numpy(ml), rtol=0, atol=0)


def test_e1m2_ties_are_round_half_even_integers():
    k = torch.arange(-7, 7, dtype=torch.float32) + 0.5
    decoded = E1M2.decode(E1M2.encode(k / 4)) * 4
    torch.testing.assert_close(decoded, torch.round(k), rtol=0, atol=0)


def test_e4m3_encode_matches_torch_cast():
    g = torch.Generator().manual_seed(1)
    x = torch.exp2(torch.empty(20000).uniform_(-10, 8.8, generator=g)).clamp(max=448)
    finite = E4M3.magnitudes[:127]
    x = torch.cat([x, (finite[1:] + finite[:-1]) / 2, finite])
    ours = E4M3.encode(x)
    torch_bytes = x.to(torch.float8_e4m3fn).view(torch.uint8)
    assert torch.equal(ours, torch_bytes)


def test_encode_decode_round_trips_every_code():
    for fmt in (E2M1, E1M2, E2M2):
        codes = torch.arange(1 << fmt.bits, dtype=torch.uint8)
        values = fmt.decode(codes)
        assert torch.equal(fmt.encode(values), codes)  # -0 keeps its sign bit


def test_get_format_names_the_options():
    assert get_format("e2m1") is E2M1
    with pytest.raises(ValueError, match="unknown format 'e3m0'"):
        get_format("e3m0")
