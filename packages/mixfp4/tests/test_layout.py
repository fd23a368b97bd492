"""Swizzled 128x4 scale layout: round trip, tile formula, and torchao's implementation when present."""

import pytest
import torch
from mixfp4.layout import from_blocked, to_blocked


@pytest.mark.parametrize("shape", [(128, 4), (130, 7), (1, 1), (300, 16)])
def test_round_trip_and_padding(shape):
    scales = torch.randint(1, 255, shape, dtype=torch.uint8)
    blocked = to_blocked(scales)
    assert blocked.numel() == 512 * (-(-shape[0] // 128)) * (-(-shape[1] // 4))
    assert torch.equal(from_blocked(blocked, *shape), scales)
    assert int((blocked != 0).sum()) == scales.numel()  # the padding is zero


def test_tile_formula_on_one_tile():
    scales = torch.arange(512).reshape(128, 4)
    blocked = to_blocked(scales)
    # r = 32 i + j lands at 16 j + 4 i + c
    assert int(blocked[16 * 5 + 4 * 2 + 3]) == int(scales[32 * 2 + 5, 3])
    assert torch.equal(blocked[:16], torch.tensor([0, 1, 2, 3, 128, 129, 130, 131,
                                                   256, 257, 258, 259, 384, 385, 386, 387]))  # fmt: skip


# torchao is in the `peers` extra only: the `peers_mixfp4` nox session (a GitHub job) installs it.
@pytest.mark.slow
def test_matches_torchao_when_installed():
    utils = pytest.importorskip("torchao.prototype.mx_formats.utils")
    scales = torch.randint(0, 255, (257, 9), dtype=torch.uint8)
    assert torch.equal(to_blocked(scales), utils.to_blocked(scales))


def test_bad_shapes():
    with pytest.raises(ValueError, match="2-D scale matrix"):
        to_blocked(torch.zeros(2, 3, 4))
    with pytest.raises(ValueError, match="has 512 entries, got 10"):
        from_blocked(torch.zeros(10), 5, 3)
