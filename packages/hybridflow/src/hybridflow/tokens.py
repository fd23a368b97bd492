"""Token counts when a server reports none, and the upper bound that budget reservations use.

A server's ``usage`` is the truth. When it is absent (a stream cut mid-way, a server that omits it)
the package estimates and flags the figure. Reservations need the opposite: a bound the server's count
cannot exceed, so that parallel steps never overspend a budget.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

# Chat templates add a few special tokens per message (role markers, separators). Eight covers the
# Llama-3, Qwen and ChatML templates.
MESSAGE_OVERHEAD_TOKENS = 8


def estimate_tokens(text: str) -> int:
    """About four characters per token: the usual English rate of byte-level BPE tokenizers."""
    return math.ceil(len(text) / 4) if text else 0


def estimate_chat_tokens(messages: Sequence[Mapping[str, str]]) -> int:
    """The estimated prompt tokens of a chat request: contents plus a template overhead per message."""
    return sum(estimate_tokens(m.get("content", "")) + MESSAGE_OVERHEAD_TOKENS for m in messages)


def bound_chat_tokens(messages: Sequence[Mapping[str, str]]) -> int:
    """An upper bound on the prompt tokens: a byte-level tokenizer emits at most one token per byte."""
    return sum(len(m.get("content", "").encode()) + MESSAGE_OVERHEAD_TOKENS for m in messages)
