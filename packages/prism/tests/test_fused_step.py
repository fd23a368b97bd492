import pytest
import torch
from prism_matfn.fused_step import step_matrix, step_matrix_reference

from shared_core.kernels import triton_enabled
from shared_core.testing import assert_kernel_matches, kernel_dtypes


def test_reference_is_the_polynomial():
    g = torch.Generator().manual_seed(0)
    R = torch.randn(2, 5, 5, generator=g, dtype=torch.float64)
    R = R + R.mT
    alpha = torch.tensor([0.375, 1.2], dtype=torch.float64)
    I = torch.eye(5, dtype=torch.float64)
    for b in range(2):
        expected = I + 0.5 * R[b] + alpha[b] * R[b] @ R[b]
        torch.testing.assert_close(step_matrix_reference(R, alpha)[b], expected)
    # A non-symmetric R (sign of a non-normal matrix) must square as R @ R, not through the Gram R Rᵀ.
    N = torch.randn(2, 5, 5, generator=g, dtype=torch.float32)
    a32 = alpha.float()
    for b in range(2):
        expected = torch.eye(5) + 0.5 * N[b] + a32[b] * N[b] @ N[b]
        torch.testing.assert_close(step_matrix(N, a32, symmetric=False)[b], expected)
        torch.testing.assert_close(step_matrix_reference(N, a32, symmetric=False)[b], expected)
    # the flag matters: the symmetric shortcut squares through the Gram product
    assert not torch.allclose(
        step_matrix_reference(N, a32, True), step_matrix_reference(N, a32, False)
    )


@pytest.mark.triton
@pytest.mark.skipif(not triton_enabled(), reason="needs triton with a GPU or TRITON_INTERPRET=1")
@pytest.mark.parametrize("dtype", kernel_dtypes())
@pytest.mark.parametrize("shape", [(7, 7), (3, 40, 40)])
def test_triton_step_matrix_matches_reference(dtype, shape):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    g = torch.Generator().manual_seed(1)
    R = (torch.randn(*shape, generator=g) / shape[-1] ** 0.5).to(device=device, dtype=dtype)
    R = (R + R.mT) / 2
    alpha = torch.linspace(0.375, 1.45, R[..., 0, 0].numel()).reshape(R.shape[:-2]).to(device)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-2, "atol": 1e-2}
    assert_kernel_matches(step_matrix, R, alpha, **tol)
