"""The errors the pool raises at its boundary: each names the adapter and what was expected."""

from __future__ import annotations


class AdapterError(ValueError):
    """An adapter that cannot join a pool; ``adapter_id`` and ``reason`` say which and why."""

    def __init__(self, adapter_id: str, reason: str, message: str) -> None:
        super().__init__(f"adapter {adapter_id!r}: {message}")
        self.adapter_id = adapter_id
        self.reason = reason


class UnsupportedAdapterError(AdapterError):
    """The adapter's config is outside the paper's filter (DoRA, modules_to_save, rank_pattern ...)."""


class IncompatibleAdapterError(AdapterError):
    """The adapter's factors do not fit the base model (shape, missing module, lone A or B)."""

    def __init__(
        self,
        adapter_id: str,
        module: str,
        expected: tuple[int, ...] | None,
        got: tuple[int, ...] | None,
        detail: str = "",
    ) -> None:
        message = detail or (
            f"module {module!r}: expected (out, in) = {expected}, got B·A of shape {got}"
        )
        super().__init__(adapter_id, "incompatible", message)
        self.module = module
        self.expected = expected
        self.got = got


class NonFiniteAdapterError(AdapterError):
    """A factor of the adapter holds NaN or Inf (hub LoRAs in bf16 occasionally do)."""
