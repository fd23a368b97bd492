import time

import numpy as np
import pytest
import torch

from shared_core.bench import compare
from shared_core.device import num_threads, seed_everything, select_device, select_dtype


def test_compare_orders_a_slow_and_a_fast_callable():
    result = compare(lambda: time.sleep(0.004), lambda: time.sleep(0.0005), repeats=5, warmup=1)
    assert result.ratio > 2
    assert result.ratio_q25 <= result.ratio <= result.ratio_q75
    assert "x [" in str(result)


def test_compare_rejects_bad_counts():
    with pytest.raises(ValueError):
        compare(lambda: None, lambda: None, repeats=0)


def test_seed_everything_makes_draws_repeat():
    g = seed_everything(7)
    a = (torch.rand(3), np.random.rand(3), torch.rand(2, generator=g))  # noqa: NPY002
    g = seed_everything(7)
    b = (torch.rand(3), np.random.rand(3), torch.rand(2, generator=g))  # noqa: NPY002
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(np.asarray(x), np.asarray(y))
    with pytest.raises(ValueError):
        seed_everything(-1)


def test_num_threads_restores():
    before = torch.get_num_threads()
    with num_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_device_and_dtype_selection():
    assert select_device("cpu") == torch.device("cpu")
    if not torch.cuda.is_available():
        assert select_device() == torch.device("cpu") or select_device().type == "mps"
        with pytest.raises(RuntimeError, match="CUDA"):
            select_device("cuda")
        assert select_dtype(None) is torch.float32
    assert select_dtype("bf16") is torch.bfloat16
    assert select_dtype(torch.float16) is torch.float16
    with pytest.raises(ValueError, match="unknown dtype"):
        select_dtype("fp8")
