"""The triton token convolution against its pure-torch twin (run with TRITON_INTERPRET=1)."""

import pytest
import torch
from spu_dna.kernels import token_conv

from shared_core.kernels.backends import HAS_TRITON, interpreting
from shared_core.testing import assert_kernel_matches, kernel_dtypes


@pytest.mark.triton
@pytest.mark.parametrize("dtype", kernel_dtypes())
@pytest.mark.parametrize("shape", [(2, 37, 16, 4, 5), (1, 9, 24, 8, 4), (1, 33, 8, 1, 9)])
def test_token_conv_kernel_matches_reference(dtype, shape):
    if not (HAS_TRITON and (interpreting() or torch.cuda.is_available())):
        pytest.skip("needs triton with CUDA or TRITON_INTERPRET=1")
    b, length, d, groups, k = shape
    device = "cuda" if torch.cuda.is_available() and not interpreting() else "cpu"
    x = torch.randn(b, length, d, device=device, dtype=dtype)
    kernels = torch.randn(b, length, groups, k, device=device, dtype=dtype).softmax(-1)
    tol = {} if dtype == torch.float32 else {"rtol": 1e-2, "atol": 1e-2}
    assert_kernel_matches(token_conv, x, kernels, **tol)


@pytest.mark.triton
def test_token_conv_kernel_gradients_match_reference():
    if not (HAS_TRITON and (interpreting() or torch.cuda.is_available())):
        pytest.skip("needs triton with CUDA or TRITON_INTERPRET=1")
    x = torch.randn(1, 20, 8, requires_grad=True)
    kernels = torch.randn(1, 20, 2, 5, requires_grad=True)
    grads = []
    for backend in ("torch", "triton"):
        out = token_conv(x, kernels, backend=backend)
        grads.append(torch.autograd.grad(out.square().sum(), (x, kernels)))
    for ours, ref in zip(grads[1], grads[0], strict=False):
        torch.testing.assert_close(ours, ref)


def test_explicit_triton_request_that_cannot_run_raises():
    if HAS_TRITON and interpreting():
        pytest.skip("the interpreter can run the kernel here")
    x, kernels = torch.randn(1, 10, 4), torch.randn(1, 10, 2, 3)
    with pytest.raises(RuntimeError, match="triton"):
        token_conv(x, kernels, backend="triton")
    with pytest.raises(ValueError, match="backend must be one of"):
        token_conv(x, kernels, backend="cuda")
    # auto on CPU without the interpreter is the reference, bit for bit
    assert torch.equal(token_conv(x, kernels), token_conv(x, kernels, backend="torch"))
