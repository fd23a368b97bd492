"""Model-level measurements shared by the reproduction and the LLM script."""

from __future__ import annotations

import math

import torch
from torch import nn


def perplexity(model: nn.Module, windows: torch.Tensor, batch_size: int = 8) -> float:
    """Next-token perplexity of a Hugging Face causal LM on ``windows`` ``[n, seq_len]`` of token ids.

    Every position but the first of each window is predicted; the loss is summed over all of them
    before the exponential (token-weighted, not window-weighted).
    """
    if windows.ndim != 2 or windows.shape[1] < 2:
        raise ValueError(f"windows must be [n, seq_len >= 2] token ids, got {tuple(windows.shape)}")
    device = next(model.parameters()).device
    total, count = 0.0, 0
    with torch.no_grad():
        for w in windows.split(batch_size):
            w = w.to(device)
            logits = model(input_ids=w).logits[:, :-1].float()
            total += float(
                nn.functional.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1), reduction="sum"
                )
            )
            count += w[:, 1:].numel()
    return math.exp(total / count)


def keep_lm_head(module: nn.Module, fqn: str) -> bool:
    """``quantize_`` filter that leaves the output projection (``lm_head``) in high precision."""
    return fqn.rsplit(".", 1)[-1] != "lm_head"
