"""Row-wise cosine similarity, top-k selection and row gather/scatter, for feature-caching methods.

Caching methods (dLLM-Cache and its kin) compare each token's fresh feature with its cached copy, pick
the ``k`` least similar rows to recompute, gather them, and scatter the results back into the cache.
The cosine is the only reduction worth a kernel; top-k, gather and scatter are single torch calls.
"""

from __future__ import annotations

import torch

from shared_core.kernels.backends import HAS_TRITON, autotune_configs, dispatch

EPS = 1e-8


def _check_pair(a: torch.Tensor, b: torch.Tensor) -> None:
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if not t.is_floating_point():
            raise TypeError(f"{name} must be floating point, got {t.dtype}")
    if a.shape != b.shape or a.ndim < 1:
        raise ValueError(
            f"a and b need one shape (..., d), got {tuple(a.shape)} and {tuple(b.shape)}"
        )


def row_cosine_reference(a: torch.Tensor, b: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """Cosine similarity of matching rows (last dim), computed and returned in float32.

    ``<a, b> / max(|a| |b|, eps)``: a zero row has similarity 0 with anything, never NaN.
    """
    a32, b32 = a.float(), b.float()
    dot = (a32 * b32).sum(-1)
    norms = a32.square().sum(-1).sqrt() * b32.square().sum(-1).sqrt()
    return dot / norms.clamp_min(eps)


if HAS_TRITON:
    import triton
    import triton.language as tl

    _CONFIGS = autotune_configs(
        [
            triton.Config({"ROWS": 16, "COLS": 128}, num_warps=4),
            triton.Config({"ROWS": 32, "COLS": 256}, num_warps=8),
            triton.Config({"ROWS": 8, "COLS": 512}, num_warps=4),
        ]
    )

    @triton.autotune(configs=_CONFIGS, key=["n_rows", "D"])
    @triton.jit
    def _row_cosine_kernel(
        a_ptr, b_ptr, out_ptr, n_rows, D, eps, ROWS: tl.constexpr, COLS: tl.constexpr
    ):
        rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
        row_mask = rows < n_rows
        dot = tl.zeros((ROWS,), dtype=tl.float32)
        na = tl.zeros((ROWS,), dtype=tl.float32)
        nb = tl.zeros((ROWS,), dtype=tl.float32)
        for c0 in range(0, D, COLS):
            cols = c0 + tl.arange(0, COLS)
            mask = row_mask[:, None] & (cols[None, :] < D)
            offs = rows[:, None] * D + cols[None, :]
            a = tl.load(a_ptr + offs, mask=mask, other=0.0).to(tl.float32)
            b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
            dot += tl.sum(a * b, axis=1)
            na += tl.sum(a * a, axis=1)
            nb += tl.sum(b * b, axis=1)
        cos = dot / tl.maximum(tl.sqrt(na) * tl.sqrt(nb), eps)
        tl.store(out_ptr + rows, cos, mask=row_mask)

    def row_cosine_triton(a: torch.Tensor, b: torch.Tensor, eps: float = EPS) -> torch.Tensor:
        """Triton twin of :func:`row_cosine_reference`."""
        d = a.shape[-1]
        a2 = a.contiguous().reshape(-1, d)
        b2 = b.contiguous().reshape(-1, d)
        out = torch.empty(a2.shape[0], device=a.device, dtype=torch.float32)
        if a2.shape[0]:

            def grid(meta: dict) -> tuple[int]:
                return (triton.cdiv(a2.shape[0], meta["ROWS"]),)

            _row_cosine_kernel[grid](a2, b2, out, a2.shape[0], d, eps)
        return out.reshape(a.shape[:-1])

else:
    row_cosine_triton = None  # type: ignore[assignment]


def row_cosine(
    a: torch.Tensor, b: torch.Tensor, *, eps: float = EPS, backend: str = "auto"
) -> torch.Tensor:
    """Cosine similarity of matching rows of ``a`` and ``b`` (shape ``(...,)``, float32)."""
    _check_pair(a, b)
    return dispatch(backend, row_cosine_reference, row_cosine_triton, a, b)(a, b, eps)


def cosine_topk(
    a: torch.Tensor,
    b: torch.Tensor,
    k: int,
    *,
    largest: bool = False,
    eps: float = EPS,
    backend: str = "auto",
) -> torch.return_types.topk:
    """The ``k`` rows per batch whose cosine between ``a`` and ``b`` is smallest (or largest).

    ``a`` and ``b`` have shape ``(..., n, d)``; returns ``(values, indices)`` of shape ``(..., k)``
    with indices into the ``n`` axis, sorted by similarity (``torch.topk``'s named tuple, so
    ``.values`` and ``.indices`` work too). Ties break by ``torch.topk``'s order.
    """
    _check_pair(a, b)
    if a.ndim < 2:
        raise ValueError(f"cosine_topk expects (..., n, d) inputs, got shape {tuple(a.shape)}")
    n = a.shape[-2]
    if not isinstance(k, int) or not 0 <= k <= n:
        raise ValueError(f"k must be an int in [0, {n}], got {k!r}")
    sim = row_cosine(a, b, eps=eps, backend=backend)
    return torch.topk(sim, k, dim=-1, largest=largest, sorted=True)


def gather_rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Rows ``index`` (shape ``(..., k)``) of ``x`` (shape ``(..., n, d)``) -> ``(..., k, d)``."""
    return x.gather(-2, index.unsqueeze(-1).expand(*index.shape, x.shape[-1]))


def scatter_rows(x: torch.Tensor, index: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """A copy of ``x`` with rows ``index`` replaced by ``rows`` (the inverse of :func:`gather_rows`)."""
    return x.scatter(-2, index.unsqueeze(-1).expand(*index.shape, x.shape[-1]), rows)
