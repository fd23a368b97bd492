"""Language-model training batches cut from one long token stream."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported on use: shared_core.data serves numpy-only packages too
    import torch


def lm_batches(
    token_ids: torch.Tensor,
    seq_len: int,
    batch_size: int,
    *,
    seed: int = 0,
    num_batches: int | None = None,
) -> Iterator[torch.Tensor]:
    """Yield ``(batch_size, seq_len)`` int64 windows at seeded random offsets of ``token_ids``.

    Each window is a next-token training example: pass it as both ``input_ids`` and
    ``labels`` to a Hugging Face causal LM (which shifts labels internally), or use
    ``w[:, :-1]`` as inputs and ``w[:, 1:]`` as targets. The offsets come from a private
    ``torch.Generator`` seeded with ``seed``, so the stream is the same on every run and
    the global RNG is untouched. Infinite unless ``num_batches`` is given.
    """
    import torch

    if token_ids.ndim != 1:
        raise ValueError(f"token_ids must be 1-D, got shape {tuple(token_ids.shape)}")
    if seq_len < 2:
        raise ValueError(f"seq_len must be >= 2 for next-token targets, got {seq_len}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    n_starts = token_ids.numel() - seq_len + 1
    if n_starts < 1:
        raise ValueError(f"token stream of length {token_ids.numel()} is shorter than {seq_len=}")
    tokens = token_ids.to(torch.long)
    generator = torch.Generator().manual_seed(seed)
    offsets = torch.arange(seq_len)
    produced = 0
    while num_batches is None or produced < num_batches:
        starts = torch.randint(n_starts, (batch_size,), generator=generator)
        yield tokens[starts[:, None] + offsets]
        produced += 1
