"""Kernels with a pure-torch reference twin and an optional triton implementation.

Each op takes ``backend="auto" | "torch" | "triton"``; ``*_reference`` is the oracle the kernel is
tested against (see :func:`shared_core.testing.assert_kernel_matches`).
"""

from shared_core.kernels.backends import (
    BACKENDS,
    HAS_TRITON,
    Backend,
    autotune_configs,
    dispatch,
    interpreting,
    resolve_backend,
    triton_enabled,
)
from shared_core.kernels.block_absmax import block_absmax, block_absmax_reference
from shared_core.kernels.cosine import (
    cosine_topk,
    gather_rows,
    row_cosine,
    row_cosine_reference,
    scatter_rows,
)
from shared_core.kernels.gram import gram, gram_reference

__all__ = [
    "BACKENDS",
    "HAS_TRITON",
    "Backend",
    "autotune_configs",
    "block_absmax",
    "block_absmax_reference",
    "cosine_topk",
    "dispatch",
    "gather_rows",
    "gram",
    "gram_reference",
    "interpreting",
    "resolve_backend",
    "row_cosine",
    "row_cosine_reference",
    "scatter_rows",
    "triton_enabled",
]
