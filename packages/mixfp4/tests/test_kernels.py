"""Bit parity of the fused triton quantizer with the torch reference (run under TRITON_INTERPRET=1)."""

import mixfp4
import pytest
import torch

from shared_core.kernels import triton_enabled
from shared_core.testing import kernel_dtypes

pytestmark = [
    pytest.mark.triton,
    pytest.mark.skipif(
        not triton_enabled(), reason="needs triton with a GPU or TRITON_INTERPRET=1"
    ),
]


def _device():
    return "cuda" if torch.cuda.is_available() else "cpu"


def _x(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g) * torch.exp(torch.randn(shape[0], 1, generator=g) * 2)
    x[0, :16] = 0  # a zero block
    x[-1, -16:] *= 1e-6  # a block that clamps at the lowest scale
    return x.to(dtype).to(_device())


@pytest.mark.parametrize("dtype", kernel_dtypes())
@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"selector": "mae"},
        {"selector": "absmax", "scale_min": "normal"},
        {"e1m2_mode": "frac"},
        {"formats": ("e1m2",)},
    ],
)
def test_fused_mixfp4_kernel_is_bit_identical_to_the_reference(dtype, kwargs):
    x = _x((9, 80), dtype)
    ref = mixfp4.quantize_mixfp4(x, backend="torch", **kwargs)
    got = mixfp4.quantize_mixfp4(x, backend="triton", **kwargs)
    assert got.equal(ref)
    assert 0 < float(ref.format_map().float().mean()) <= 1


def test_fused_nvfp4_kernel_is_bit_identical_and_warns_on_saturation():
    x = _x((4, 64), torch.float32, seed=1)
    assert mixfp4.quantize_nvfp4(x, backend="triton").equal(
        mixfp4.quantize_nvfp4(x, backend="torch")
    )
    with pytest.warns(UserWarning, match="saturated"):
        got = mixfp4.quantize_nvfp4(x, tensor_scale=1e-6, backend="triton")
    with pytest.warns(UserWarning, match="saturated"):
        ref = mixfp4.quantize_nvfp4(x, tensor_scale=1e-6, backend="torch")
    assert got.equal(ref)


def test_fused_kernel_on_every_e2m1_tie_and_e4m3_boundary():
    # Element values exactly on E2M1 midpoints with a block scale of exactly 1 (tensor scale 1).
    ties = torch.tensor(
        [6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -2.5, -5.0, 0, 1, 2, 3, 4]
    )
    # Block maxima whose scale amax/6 sits on E4M3 midpoints.
    e4m3 = mixfp4.E4M3.magnitudes[8:126]
    mids = (e4m3[1:] + e4m3[:-1]) / 2
    blocks = torch.zeros(mids.numel(), 16)
    blocks[:, 0] = mids * 6
    blocks[:, 1:] = torch.linspace(-1, 1, 15) * mids[:, None] * 5
    x = torch.cat([ties[None], blocks]).to(_device())
    for fmt_kwargs in ({}, {"formats": ("e2m1",)}):
        ref = mixfp4.quantize_mixfp4(x, tensor_scale=1.0, backend="torch", **fmt_kwargs)
        got = mixfp4.quantize_mixfp4(x, tensor_scale=1.0, backend="triton", **fmt_kwargs)
        assert got.equal(ref)


def test_fused_kernel_with_padding_and_nan_blocks():
    x = _x((3, 40), torch.float32, seed=2)
    x[1, 20] = float("nan")
    kwargs = {"nan_policy": "propagate"}
    ref = mixfp4.quantize_mixfp4(x, backend="torch", **kwargs)
    got = mixfp4.quantize_mixfp4(x, backend="triton", **kwargs)
    assert got.equal(ref)
    assert int(got.scales[1, 1]) == 0x7F


@pytest.mark.parametrize("kwargs", [{}, {"e1m2_mode": "frac", "selector": "mae"}])
def test_fused_kernel_stochastic_rounding_is_bit_identical(kwargs):
    # Values at grid points and at the clamp (6 and 7 after scaling) as well as random ones.
    x = _x((6, 64), torch.float32, seed=3)
    x[1, :16] = torch.tensor([6.0, 4, 3, 2, 1.5, 1, 0.5, 0, -6, -4, -3, -2, -1.5, -1, -0.5, 5.9])
    runs = {}
    for backend in ("torch", "triton"):
        g = torch.Generator(device=_device()).manual_seed(4)
        runs[backend] = mixfp4.quantize_mixfp4(
            x, rounding="stochastic", generator=g, backend=backend, **kwargs
        )
    assert runs["triton"].equal(runs["torch"])
    assert not runs["torch"].equal(mixfp4.quantize_mixfp4(x, backend="torch", **kwargs))
    nv = {
        b: mixfp4.quantize_nvfp4(
            x,
            rounding="stochastic",
            generator=torch.Generator(device=_device()).manual_seed(5),
            backend=b,
        )
        for b in ("torch", "triton")
    }
    assert nv["triton"].equal(nv["torch"])


def test_autotune_key_is_a_power_of_two_bucket_and_fp_fusion_is_off():
    import inspect

    from mixfp4 import kernels

    assert [kernels.block_count_bucket(n) for n in (1, 2, 3, 16, 17, 1000)] == [
        1,
        2,
        4,
        16,
        32,
        1024,
    ]
    source = inspect.getsource(kernels)
    assert 'key=["n_bucket", "BLOCK"]' in source and "enable_fp_fusion=False" in source
