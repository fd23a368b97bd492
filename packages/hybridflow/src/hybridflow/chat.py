"""Chat history: earlier turns of a conversation, carried into every model call of a query.

A follow-up question ("and if x1 were doubled?") only makes sense with the turns before it, so
:meth:`HybridFlow.arun` takes ``history`` (OpenAI-style messages) and each call -- planner, steps,
aggregation, direct answer -- sees those turns between its own system prompt and its own user message.
The history's system messages are folded into the call's system prompt, because many chat templates
accept one system message only, and only first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Message = dict[str, str]
ROLES = ("system", "user", "assistant")


def check_history(history: Sequence[Any] | None, name: str = "history") -> tuple[Message, ...]:
    """Validated copies of ``history``: each a mapping with a ``role`` in ``ROLES`` and a str ``content``."""
    if history is None:
        return ()
    if isinstance(history, (str, bytes)) or not isinstance(history, Sequence):
        raise TypeError(f"{name} must be a list of messages, got {type(history).__name__}")
    out = []
    for i, message in enumerate(history):
        if not isinstance(message, dict):
            raise TypeError(f"{name}[{i}] must be a dict, got {type(message).__name__}")
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            raise ValueError(f"{name}[{i}] has role {role!r}, expected one of {ROLES}")
        if not isinstance(content, str):
            raise ValueError(f"{name}[{i}] content must be a str, got {type(content).__name__}")
        out.append({"role": str(role), "content": content})
    return tuple(out)


def with_history(messages: list[Message], history: Sequence[Message]) -> list[Message]:
    """``messages`` with ``history`` inserted after its leading system message (history's system
    messages appended to that one)."""
    if not history:
        return messages
    head = messages[0] if messages and messages[0]["role"] == "system" else None
    rest = messages[1:] if head is not None else messages
    system = [m["content"] for m in history if m["role"] == "system"]
    turns = [m for m in history if m["role"] != "system"]
    if head is not None or system:
        content = "\n\n".join(([head["content"]] if head else []) + system)
        return [{"role": "system", "content": content}, *turns, *rest]
    return [*turns, *rest]
