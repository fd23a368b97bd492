"""Parity of the triton shrink/expand kernels with the torch reference (run under TRITON_INTERPRET=1)."""

import pytest
import torch
from lora_recycle.kernels import lora_cat_forward

from shared_core.kernels import triton_enabled
from shared_core.testing import assert_kernel_matches, kernel_dtypes

pytestmark = [
    pytest.mark.triton,
    pytest.mark.skipif(
        not triton_enabled(), reason="needs triton with a GPU or TRITON_INTERPRET=1"
    ),
]
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.parametrize("dtype", kernel_dtypes())
@pytest.mark.parametrize(
    ("tokens", "dim_in", "rank", "dim_out"), [(5, 24, 10, 20), (33, 40, 36, 17)]
)
def test_forward_matches_reference(dtype, tokens, dim_in, rank, dim_out):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, tokens, dim_in, generator=g).to(DEVICE, dtype)
    a = (torch.randn(rank, dim_in, generator=g) / dim_in**0.5).to(DEVICE, dtype)
    m = torch.randn(rank, generator=g).to(DEVICE, dtype)
    b = (torch.randn(dim_out, rank, generator=g) / rank**0.5).to(DEVICE, dtype)
    tol = {"rtol": 2e-2, "atol": 2e-2} if dtype == torch.float16 else {"rtol": 1e-4, "atol": 1e-4}
    assert_kernel_matches(lora_cat_forward, x, a, m, b, **tol)


def test_backward_matches_reference():
    g = torch.Generator().manual_seed(1)
    tensors = [
        torch.randn(7, 16, generator=g),
        torch.randn(12, 16, generator=g),
        torch.randn(12, generator=g),
        torch.randn(9, 12, generator=g),
    ]
    grads = {}
    for backend in ("torch", "triton"):
        leaves = [t.clone().to(DEVICE).requires_grad_() for t in tensors]
        lora_cat_forward(*leaves, backend=backend).square().sum().backward()
        grads[backend] = [leaf.grad for leaf in leaves]
    for got, want in zip(grads["triton"], grads["torch"], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_backward_skips_the_frozen_factors():
    # A_cat and B_cat are frozen buffers outside π-Tuning: the backward must neither compute nor
    # return their gradients (it used to run all four GEMMs, review o9).
    g = torch.Generator().manual_seed(2)
    x = torch.randn(7, 16, generator=g).to(DEVICE).requires_grad_()
    a, b = torch.randn(12, 16, generator=g).to(DEVICE), torch.randn(9, 12, generator=g).to(DEVICE)
    m = torch.randn(12, generator=g).to(DEVICE).requires_grad_()
    grads = {}
    for backend in ("torch", "triton"):
        out = lora_cat_forward(x, a, m, b, backend=backend).square().sum()
        grads[backend] = torch.autograd.grad(out, (x, m))
    for got, want in zip(grads["triton"], grads["torch"], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        lora_cat_forward(x, a, m, b, backend="triton").sum().backward()
    if DEVICE == "cpu":  # the backward's GEMMs run in torch: g @ B and (g B ⊙ m) @ A only
        assert sum(e.count for e in prof.key_averages() if e.key == "aten::mm") == 2
    assert a.grad is None and b.grad is None
