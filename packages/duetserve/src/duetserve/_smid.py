"""A Triton probe kernel: each block writes the id of the SM it ran on (GPU only, imported lazily)."""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl


@triton.jit
def _smid_kernel(out_ptr, spin: tl.constexpr):
    pid = tl.program_id(0)
    zero = tl.zeros([1], dtype=tl.int32)
    smid = tl.inline_asm_elementwise(
        "mov.u32 $0, %smid;", "=r,r", [zero], dtype=tl.int32, is_pure=False, pack=1
    )
    # A short spin keeps blocks resident so the scheduler spreads them over every SM it may use.
    acc = zero
    for _ in range(spin):
        acc = acc * 3 + 1
    tl.store(out_ptr + pid + tl.arange(0, 1), smid + acc * 0)


def probe_smids(blocks: int, device: Any) -> torch.Tensor:
    """Launch ``blocks`` one-warp blocks on the current stream; the SM id each ran on."""
    out = torch.empty(blocks, dtype=torch.int32, device=device)
    _smid_kernel[(blocks,)](out, spin=2048, num_warps=1)
    return out
