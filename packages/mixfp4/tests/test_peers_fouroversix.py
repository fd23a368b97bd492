"""IF4, four-over-six and NVFP4 (1-D and 2-D blocks) against fouroversix's own PyTorch reference.

fouroversix installs on CPU without its CUDA extensions:
``SKIP_CUDA_BUILD=1 pip install --no-build-isolation --no-deps fouroversix==1.0.5``; the
``peers_mixfp4`` nox session does that.
"""

import mixfp4
import pytest
import torch
from mixfp4.baselines import fake_quantize_baseline
from mixfp4.packed import unpack_nibbles
from mixfp4.reproduce import distributions

pytestmark = pytest.mark.slow
R = pytest.importorskip("fouroversix.quantize.pytorch.reference")
from fouroversix.utils import DataType, ScaleRule  # noqa: E402


@pytest.fixture(scope="module")
def data():
    # 1024² per distribution: the size at which the rounding-order difference of four-over-six's
    # ×1.5 scale showed on uniform data (14 elements in 2 blocks) before we followed its order.
    return distributions(1024, 1024, torch.Generator().manual_seed(0))


def _peer_if4(x):
    b, amax = x.reshape(-1, 16).float(), x.abs().max().float()
    scaled, scales = R.quantize_to_nvfp4(b, amax, scale_rule=ScaleRule.static_6)
    fq, sel_scales = R.select_intfloat(b, scaled, scales, amax, scale_rule=ScaleRule.mse)
    byte = sel_scales.view(torch.uint8).reshape(-1)
    is_int = byte >= 128  # IF4 flags an INT block in the scale's sign bit
    s_b = (byte & 0x7F).view(torch.float8_e4m3fn).float().unsqueeze(1)
    level = torch.where(is_int, 6 / 7, 1.0).unsqueeze(1)
    # Blocks holding only 0 and ±amax_b decode the same on both grids: an exact tie that our float64
    # errors keep on E2M1 and fouroversix's float32 ones break by rounding noise either way.
    fp = R.fake_quantize_to_e2m1(scaled)
    ties = (fp == R.fake_quantize_to_int4(scaled * (7 / 6)) * (6 / 7)).all(-1)
    return (fq.float() * s_b * amax / (6 * 448) * level).reshape(x.shape), is_int, ties


def _peer_fouroversix(x):
    b, amax = x.reshape(-1, 16).float(), x.abs().max().float()
    b6, s6 = R.quantize_to_nvfp4(b, amax, scale_rule=ScaleRule.mse)
    b4, s4 = R.quantize_to_nvfp4(b, amax, scale_rule=ScaleRule.mse, scale_expansion_factor=1.5)
    fq, scales = R.select_fouroversix(b, b6, s6, b4, s4, amax, scale_rule=ScaleRule.mse)
    out = fq.float() * scales.float().reshape(-1, 1) * amax / (6 * 256)
    ties = torch.zeros(b.shape[0], dtype=torch.bool)  # the two scales never decode alike
    return out.reshape(x.shape), scales.float().reshape(-1) != s6.float().reshape(-1), ties


@pytest.mark.parametrize("method", ["if4", "fouroversix"])
def test_baselines_equal_fouroversix_reference(data, method):
    peer = _peer_if4 if method == "if4" else _peer_fouroversix
    for name, x in data.items():
        ours, share = fake_quantize_baseline(x, method)
        theirs, alternative, ties = peer(x)
        n = alternative.numel()
        assert abs(round(share * n) - int(alternative.sum())) <= int(ties.sum()), name
        # same codes and scales; the decode's multiplication order may move the last bit only
        torch.testing.assert_close(ours, theirs, rtol=3e-7, atol=0, msg=name)


@pytest.mark.parametrize("block_2d", [False, True])
def test_nvfp4_equals_fouroversix_reference(data, block_2d):
    for name in ("gaussian", "student_t3", "gaussian_row_lognormal"):
        x = data[name][:512]
        q, scales, _ = R.quantize_to_fp4(
            x,
            block_scale_2d=block_2d,
            fp4_format=DataType.nvfp4,
            scale_rule=ScaleRule.static_6,
            pack_values=False,
            use_blackwell_scale_layout=False,
        )
        ours = mixfp4.quantize_nvfp4(x, block_2d=block_2d)
        theirs_bytes = scales.reshape(ours.scales.shape).contiguous().view(torch.uint8)
        assert torch.equal(theirs_bytes, ours.scales), name
        values = mixfp4.E2M1.decode(unpack_nibbles(ours.codes)).reshape(x.shape)
        assert torch.equal(q.float(), values), name
