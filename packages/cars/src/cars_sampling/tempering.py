"""The next-token distribution the sampler targets: temperature, and top-k/top-p only on request.

Exactness always holds with respect to *this* distribution. Temperature 1 without truncation is
the model itself; top-k/top-p change the target, so :class:`~cars_sampling.CARSSampler` refuses
them unless the caller opts in with ``allow_truncation=True``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch


def check_sampling_args(
    temperature: float, top_k: int | None, top_p: float | None, allow_truncation: bool
) -> None:
    """Raise ``ValueError`` for a temperature <= 0 or a truncation the caller did not opt into."""
    if (
        not isinstance(temperature, (int, float))
        or not math.isfinite(temperature)
        or temperature <= 0
    ):
        raise ValueError(
            f"temperature must be a finite number > 0, got {temperature!r} (greedy decoding is "
            "not sampling: a constrained argmax has no distribution to be exact about)"
        )
    if top_k is not None and (not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be None or an int >= 1, got {top_k!r}")
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be None or in (0, 1], got {top_p!r}")
    if (top_k is not None or top_p is not None) and not allow_truncation:
        raise ValueError(
            f"top_k={top_k!r}/top_p={top_p!r} truncate the model's distribution, so samples would be "
            "exact only for the truncated model; pass allow_truncation=True to accept that"
        )


def check_logprobs(logp: torch.Tensor, prefix: Sequence[int]) -> None:
    """Refuse NaN, +inf or an all ``-inf`` distribution: a broken LM is not an exhausted language."""
    top = float(logp.max())  # NaN propagates through max; all -inf gives -inf: one pass for all
    if math.isnan(top):
        raise ValueError(
            f"the LM returned NaN log-probs after the generated prefix {list(prefix)[:20]} "
            f"(prompt excluded); check the model's weights and dtype"
        )
    if top == math.inf:
        ids = torch.nonzero(logp == math.inf).flatten().tolist()[:10]
        raise ValueError(
            f"the LM returned log-prob +inf for token ids {ids} after the generated prefix "
            f"{list(prefix)[:20]} (prompt excluded); log-probs must be finite or -inf"
        )
    if top == -math.inf:
        raise ValueError(
            f"the LM gave every token log-prob -inf after the generated prefix {list(prefix)[:20]} "
            f"(prompt excluded): no next-token distribution to sample from"
        )


def transform_logprobs(
    logp: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> torch.Tensor:
    """Log-probs of the tempered, optionally truncated, renormalised distribution (float32)."""
    if temperature == 1.0 and top_k is None and top_p is None:
        return logp.to(torch.float32)
    x = logp.to(torch.float64) / temperature
    if top_k is not None and top_k < x.numel():
        kth = torch.topk(x, top_k).values[-1]
        x = torch.where(x < kth, torch.full_like(x, -math.inf), x)
    if top_p is not None and top_p < 1.0:
        sorted_x, order = torch.sort(x, descending=True)
        cum = torch.cumsum(torch.softmax(sorted_x, 0), 0)
        drop = cum - torch.softmax(sorted_x, 0) >= top_p  # keep the smallest head reaching top_p
        x[order[drop]] = -math.inf
    return torch.log_softmax(x, 0).to(torch.float32)
