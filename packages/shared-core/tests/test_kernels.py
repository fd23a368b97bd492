"""Kernel references against first principles, dispatch rules, and triton parity (interpreter/GPU)."""

import pytest
import torch

from shared_core import kernels
from shared_core.kernels import backends
from shared_core.testing import assert_kernel_matches, kernel_dtypes

needs_triton = pytest.mark.skipif(
    not kernels.triton_enabled(), reason="needs triton with a GPU or TRITON_INTERPRET=1"
)


# -- references ------------------------------------------------------------------------------------
def test_gram_reference_is_the_symmetric_product():
    x = torch.randn(2, 3, 5, 7, dtype=torch.float64)
    g = kernels.gram(x, backend="torch")
    assert g.shape == (2, 3, 5, 5)
    torch.testing.assert_close(g, torch.einsum("...ik,...jk->...ij", x, x))
    torch.testing.assert_close(g, g.mT)


def test_block_absmax_reference_matches_a_loop():
    x = torch.randn(3, 64)
    got = kernels.block_absmax(x, 16, backend="torch")
    want = torch.tensor(
        [[x[r, b * 16 : (b + 1) * 16].abs().max().item() for b in range(4)] for r in range(3)]
    )
    torch.testing.assert_close(got, want)


def test_row_cosine_reference_matches_torch_and_handles_zero_rows():
    a, b = torch.randn(4, 6, 9), torch.randn(4, 6, 9)
    torch.testing.assert_close(
        kernels.row_cosine(a, b, backend="torch"),
        torch.nn.functional.cosine_similarity(a, b, dim=-1),
    )
    zero = torch.zeros(2, 9)
    assert torch.equal(kernels.row_cosine(zero, torch.randn(2, 9), backend="torch"), torch.zeros(2))


def test_cosine_topk_picks_the_least_similar_rows_and_gather_scatter_invert():
    torch.manual_seed(0)
    cached = torch.randn(2, 10, 8)
    fresh = cached.clone()
    changed = torch.tensor([[1, 7], [0, 4]])
    for bi in range(2):
        fresh[bi, changed[bi]] = torch.randn(2, 8)
    values, idx = kernels.cosine_topk(fresh, cached, 2)
    assert torch.equal(idx.sort(-1).values, changed)
    assert (values < 1 - 1e-6).all()
    rows = kernels.gather_rows(fresh, idx)
    torch.testing.assert_close(kernels.scatter_rows(cached, idx, rows), fresh)


@pytest.mark.parametrize(
    ("op", "args", "message"),
    [
        (kernels.gram, (torch.randn(5),), "matrix"),
        (kernels.gram, (torch.ones(2, 2, dtype=torch.int64),), "floating-point"),
        (kernels.block_absmax, (torch.randn(3, 20), 16), "multiple of block_size=16"),
        (kernels.block_absmax, (torch.randn(3, 16), 0), "positive int"),
        (kernels.row_cosine, (torch.randn(3, 4), torch.randn(3, 5)), "one shape"),
        (
            kernels.cosine_topk,
            (torch.randn(3, 4), torch.randn(3, 4), 4),
            r"k must be an int in \[0, 3\]",
        ),
    ],
)
def test_bad_inputs_name_the_value(op, args, message):
    with pytest.raises((ValueError, TypeError), match=message):
        op(*args)


# -- dispatch --------------------------------------------------------------------------------------
def test_auto_uses_the_reference_on_cpu_without_the_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert kernels.resolve_backend("auto", torch.zeros(1)) == "torch"
    assert kernels.resolve_backend("torch", torch.zeros(1)) == "torch"


def test_auto_uses_triton_under_the_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    expected = "triton" if kernels.HAS_TRITON else "torch"
    assert kernels.resolve_backend("auto", torch.zeros(1)) == expected


def test_explicit_triton_that_cannot_run_raises(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(RuntimeError, match="triton"):
        kernels.resolve_backend("triton", torch.zeros(1))
    with pytest.raises(ValueError, match="backend must be one of"):
        kernels.resolve_backend("cuda", torch.zeros(1))


def test_explicit_triton_without_the_package_names_the_extra(monkeypatch):
    monkeypatch.setattr(backends, "HAS_TRITON", False)
    with pytest.raises(RuntimeError, match=r"shared-core\[triton\]"):
        kernels.resolve_backend("triton", torch.zeros(1))


def test_autotune_configs_shrink_under_the_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert kernels.autotune_configs([1, 2, 3]) == [1]
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert kernels.autotune_configs([1, 2, 3]) == [1, 2, 3]
    with pytest.raises(ValueError):
        kernels.autotune_configs([])


# -- triton parity ---------------------------------------------------------------------------------
@pytest.mark.triton
@needs_triton
@pytest.mark.parametrize("dtype", kernel_dtypes())
@pytest.mark.parametrize("shape", [(37, 19), (2, 70, 45), (1, 1)])
def test_gram_kernel_matches_reference(dtype, shape):
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=dtype)
    assert_kernel_matches(kernels.gram, x)


@pytest.mark.triton
@needs_triton
@pytest.mark.parametrize("dtype", kernel_dtypes())
@pytest.mark.parametrize("block", [16, 32])
def test_block_absmax_kernel_matches_reference(dtype, block):
    torch.manual_seed(0)
    x = torch.randn(5, 3, 4 * block, dtype=dtype) * 7
    assert_kernel_matches(kernels.block_absmax, x, block)


@pytest.mark.triton
@needs_triton
@pytest.mark.parametrize("dtype", kernel_dtypes())
def test_row_cosine_kernel_matches_reference(dtype):
    torch.manual_seed(0)
    a, b = torch.randn(2, 33, 300, dtype=dtype), torch.randn(2, 33, 300, dtype=dtype)
    a[0, 3] = 0  # a zero row: similarity 0, not NaN
    assert_kernel_matches(kernels.row_cosine, a, b)
    assert_kernel_matches(kernels.cosine_topk, a, b, 5)
