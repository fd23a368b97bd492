"""The swizzled block-scale layout Blackwell tensor cores read (cuBLAS "1D block scaling factors").

A scale matrix ``[rows, cols]`` (one scale per 16 elements of K) is cut into 128×4 tiles, zero-padded
at the edges, tiles laid out row-major; inside a tile, scale ``(r, c)`` with ``r = 32·i + j`` goes to
``16·j + 4·i + c``. Only a GPU GEMM needs this; the container keeps row-major scales.
"""

from __future__ import annotations

import torch

__all__ = ["blocked_offsets", "from_blocked", "to_blocked"]

TILE_ROWS, TILE_COLS = 128, 4


def _tiles(rows: int, cols: int) -> tuple[int, int]:
    return -(-rows // TILE_ROWS), -(-cols // TILE_COLS)


def blocked_offsets(rows: int, cols: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """int64 ``[rows, cols]``: where each scale lands in the flat swizzled buffer."""
    _, n_col_tiles = _tiles(rows, cols)
    r = torch.arange(rows, device=device)[:, None]
    c = torch.arange(cols, device=device)[None, :]
    tile = (r // TILE_ROWS) * n_col_tiles + c // TILE_COLS
    inner = (r % 32) * 16 + ((r % TILE_ROWS) // 32) * 4 + c % TILE_COLS
    return tile * (TILE_ROWS * TILE_COLS) + inner


def to_blocked(scales: torch.Tensor) -> torch.Tensor:
    """Flat swizzled copy of 2-D ``scales`` (length ``512 · row_tiles · col_tiles``, zero padded)."""
    if scales.ndim != 2:
        raise ValueError(f"to_blocked expects a 2-D scale matrix, got shape {tuple(scales.shape)}")
    rows, cols = scales.shape
    n_row_tiles, n_col_tiles = _tiles(rows, cols)
    out = torch.zeros(n_row_tiles * n_col_tiles * TILE_ROWS * TILE_COLS, dtype=scales.dtype,
                      device=scales.device)  # fmt: skip
    out[blocked_offsets(rows, cols, scales.device).reshape(-1)] = scales.reshape(-1)
    return out


def from_blocked(blocked: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """Inverse of :func:`to_blocked`: the row-major ``[rows, cols]`` scales."""
    n_row_tiles, n_col_tiles = _tiles(rows, cols)
    expected = n_row_tiles * n_col_tiles * TILE_ROWS * TILE_COLS
    if blocked.numel() != expected:
        raise ValueError(
            f"a blocked buffer for {rows}x{cols} scales has {expected} entries, got {blocked.numel()}"
        )
    return blocked.reshape(-1)[blocked_offsets(rows, cols, blocked.device)]
