"""Helpers for package test suites: kernel parity and dtype lists that respect the interpreter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from shared_core.kernels.backends import interpreting


def kernel_dtypes() -> list[torch.dtype]:
    """Dtypes a kernel parity test can use here: bf16 only on a real GPU (the interpreter breaks it)."""
    dtypes = [torch.float32, torch.float16]
    if torch.cuda.is_available() and not interpreting():
        dtypes.append(torch.bfloat16)
    return dtypes


def assert_kernel_matches(
    op: Callable[..., Any],
    *args: Any,
    rtol: float | None = None,
    atol: float | None = None,
    **kwargs: Any,
) -> None:
    """Assert that ``op(..., backend="triton")`` equals ``op(..., backend="torch")``.

    ``op`` is a dispatched op from :mod:`shared_core.kernels` or a package's own. Outputs may be a
    tensor or a tuple of tensors; tolerances default to ``torch.testing.assert_close``'s per dtype.
    """
    expected = op(*args, backend="torch", **kwargs)
    actual = op(*args, backend="triton", **kwargs)
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)
