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
