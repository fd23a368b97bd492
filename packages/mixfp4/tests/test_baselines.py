"""IF4 and four-over-six reference baselines: closed-form blocks and the NVFP4 candidate's bits."""

import pytest
import torch
from mixfp4 import dequantize, quantize_nvfp4
from mixfp4.baselines import fake_quantize_baseline


def _per_block_sse(x, xhat):
    return (xhat.double() - x.double()).square().reshape(-1, 16).sum(-1)


def test_if4_never_worse_than_nvfp4_per_block_and_its_fp_blocks_are_nvfp4_bits():
    x = torch.randn(64, 256, generator=torch.Generator().manual_seed(0))
    nv = dequantize(quantize_nvfp4(x))
    if4, share = fake_quantize_baseline(x, "if4")
    assert 0.2 < share < 0.9  # both grids are used on Gaussian data
    assert (_per_block_sse(x, if4) <= _per_block_sse(x, nv)).all()
    # Blocks that kept E2M1 are our NVFP4 blocks bit for bit (same tensor and block scale rules).
    same = (if4.reshape(-1, 16) == nv.reshape(-1, 16)).all(-1)
    assert same.float().mean() >= 1 - share - 1e-9


def test_if4_picks_int_on_its_stretched_uniform_grid_with_zero_error():
    # Levels k·6/7 · c: the INT candidate is exact, E2M1 cannot be (it has no 6/7·{1,2,3,5} levels).
    c = 0.5
    block = torch.tensor([k * 6 / 7 * c for k in range(-7, 8)] + [0.0])
    # One block: s_t = 6c / (448·6) and its block scale is exactly 448, so the levels are exact.
    out, share = fake_quantize_baseline(block.reshape(1, 16), "if4")
    assert share == 1.0
    torch.testing.assert_close(out.reshape(-1), block, rtol=1e-6, atol=0)


def test_fouroversix_scale_to_four_wins_on_a_block_of_the_four_grid():
    # Values whose maximum is 4 on the E2M1 grid {0, .5, 1, 1.5, 2, 3, 4}: exact with the 4 scale,
    # while the 6 scale maps 4 -> 6 and 3 -> 4.5 (rounded) and loses.
    vals = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, -4, -3, -2, -1.5, -1, -0.5, 0, 3, 1.5])
    out, share = fake_quantize_baseline(vals.reshape(1, 16), "fouroversix")
    assert share == 1.0
    torch.testing.assert_close(out.reshape(-1), vals, rtol=1e-6, atol=0)


def test_fouroversix_never_worse_than_its_scale_six_candidate():
    x = torch.randn(32, 128, generator=torch.Generator().manual_seed(1))
    out, share = fake_quantize_baseline(x, "fouroversix")
    assert 0 < share < 1
    # Its scale-6 candidate is NVFP4 with the tensor scale amax / (256·6), up to the last bit:
    # four-over-six follows fouroversix's order of operations, our NVFP4 torchao's.
    six = dequantize(quantize_nvfp4(x, tensor_scale=float(x.abs().amax()) / (256 * 6)))
    assert (_per_block_sse(x, out) <= _per_block_sse(x, six) * (1 + 1e-5)).all()
    assert (_per_block_sse(x, out) < _per_block_sse(x, six) * 0.99).sum() >= share * 128


def test_bad_method_and_ragged_last_dim():
    with pytest.raises(ValueError, match="method must be one of"):
        fake_quantize_baseline(torch.zeros(16), "nvint4")
    with pytest.raises(ValueError, match="last dimension 17"):
        fake_quantize_baseline(torch.zeros(17), "if4")


@pytest.mark.parametrize(
    ("x", "kwargs", "error", "needle"),
    [
        (torch.tensor([[float("nan")] + [1.0] * 15]), {}, ValueError, "1 NaN or infinite"),
        (torch.tensor([[float("inf")] + [1.0] * 15]), {}, ValueError, "1 NaN or infinite"),
        (torch.ones(2, 16, dtype=torch.int64), {}, TypeError, "torch.int64"),
        (torch.tensor(1.0), {}, ValueError, r"shape \(\)"),
        (
            torch.ones(2, 16),
            {"block_size": 0},
            ValueError,
            "block_size must be a positive int, got 0",
        ),
        (torch.ones(2, 16), {"block_size": 16.0}, ValueError, "got 16.0"),
        ([1.0] * 16, {}, TypeError, "list"),
    ],
)
@pytest.mark.parametrize("method", ["if4", "fouroversix"])
def test_bad_input_is_refused_naming_the_value(method, x, kwargs, error, needle):
    with pytest.raises(error, match=needle):
        fake_quantize_baseline(x, method, **kwargs)


def test_baselines_module_is_reachable_after_import_mixfp4():
    import mixfp4

    assert mixfp4.baselines.fake_quantize_baseline is fake_quantize_baseline
