"""Test helpers. (torch.testing.assert_close costs ~20 s of imports on its first call here.)"""

import torch


def assert_close(actual, expected, atol=1e-12):
    actual = torch.as_tensor(actual).detach()
    expected = torch.as_tensor(expected, dtype=actual.dtype).detach()
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    err = float((actual - expected).abs().max()) if actual.numel() else 0.0
    assert err <= atol, f"max abs error {err:.3g} > {atol:.3g}"
