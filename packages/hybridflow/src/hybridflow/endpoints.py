"""Endpoints, budgets and the retry policy: plain settings, validated at construction."""

from __future__ import annotations

import dataclasses
import math
import os
from urllib.parse import urlparse

_LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}
# Local OpenAI-compatible servers (vLLM, SGLang, llama.cpp) accept any key; the SDK insists on one.
LOCAL_API_KEY = "EMPTY"


def _check_positive(
    name: str, value: float | None, *, allow_none: bool = True, allow_zero: bool = False
) -> None:
    if value is None and allow_none:
        return
    if (
        not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
        or (value == 0 and not allow_zero)
    ):
        raise ValueError(
            f"{name} must be a finite number {'>= 0' if allow_zero else '> 0'}, got {value!r}"
        )


@dataclasses.dataclass
class ModelEndpoint:
    """Any OpenAI-compatible chat endpoint.

    ``name`` is the ``model`` sent to the server. A remote endpoint needs ``api_key`` (or the variable
    named by ``api_key_env``) at construction; a loopback one gets a placeholder. ``max_concurrency``
    bounds both the in-flight requests and the HTTP connection pool. ``ttft_s``/``tokens_per_s`` feed
    the latency model and the simulated servers.
    """

    name: str
    base_url: str
    api_key: str | None = None
    price_in_per_mtok: float = 0.0
    price_out_per_mtok: float = 0.0
    ttft_s: float | None = None
    tokens_per_s: float | None = None
    max_concurrency: int = 16
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 60.0
    max_tokens: int = 512
    api_key_env: str | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("ModelEndpoint.name (the model id) must be non-empty")
        parsed = urlparse(self.base_url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(
                f"ModelEndpoint {self.name!r}: base_url must be http(s)://host[:port]/..., got {self.base_url!r}"
            )
        if self.api_key is None and self.api_key_env:
            self.api_key = os.environ.get(self.api_key_env)
        if self.api_key is not None and not self.api_key.strip() and not self.is_local:
            raise ValueError(f"ModelEndpoint {self.name!r}: api_key is empty for {self.base_url}")
        if self.api_key is None:
            if not self.is_local:
                where = f" or set ${self.api_key_env}" if self.api_key_env else ""
                raise ValueError(
                    f"ModelEndpoint {self.name!r} at {self.base_url} is remote and has no api_key{where}"
                )
            self.api_key = LOCAL_API_KEY
        for field in ("price_in_per_mtok", "price_out_per_mtok"):
            _check_positive(
                f"{self.name}.{field}", getattr(self, field), allow_none=False, allow_zero=True
            )
        for field in ("ttft_s",):
            _check_positive(f"{self.name}.{field}", getattr(self, field), allow_zero=True)
        for field in ("tokens_per_s", "connect_timeout_s", "read_timeout_s"):
            _check_positive(f"{self.name}.{field}", getattr(self, field))
        for field in ("max_concurrency", "max_tokens"):
            if not isinstance(getattr(self, field), int) or getattr(self, field) < 1:
                raise ValueError(
                    f"{self.name}.{field} must be an int >= 1, got {getattr(self, field)!r}"
                )

    @property
    def is_local(self) -> bool:
        return (urlparse(self.base_url).hostname or "") in _LOCAL_HOSTS

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """US$ of one call."""
        return (
            prompt_tokens * self.price_in_per_mtok + completion_tokens * self.price_out_per_mtok
        ) / 1e6


@dataclasses.dataclass(frozen=True)
class Budget:
    """Hard per-query caps; ``None`` means uncapped. Reserved before dispatch (see BudgetLedger)."""

    max_tokens: int | None = None
    max_cloud_tokens: int | None = None
    max_cost_usd: float | None = None

    def __post_init__(self) -> None:
        _check_positive("Budget.max_tokens", self.max_tokens)
        _check_positive("Budget.max_cloud_tokens", self.max_cloud_tokens)
        _check_positive("Budget.max_cost_usd", self.max_cost_usd)


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """One retry layer (the SDK's own retries are off under it).

    ``attempts`` in all (official: 3); exponential backoff ``base_delay_s * 2**k`` capped at
    ``max_delay_s`` with full jitter; a server's ``Retry-After`` (up to ``max_retry_after_s``) replaces
    the backoff. Retried: connection errors and timeouts, HTTP 408/409/429/5xx, and broken streams.
    """

    attempts: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    max_retry_after_s: float = 60.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.attempts, int) or self.attempts < 1:
            raise ValueError(f"RetryPolicy.attempts must be an int >= 1, got {self.attempts!r}")
        _check_positive(
            "RetryPolicy.base_delay_s", self.base_delay_s, allow_none=False, allow_zero=True
        )
        _check_positive(
            "RetryPolicy.max_delay_s", self.max_delay_s, allow_none=False, allow_zero=True
        )
        _check_positive(
            "RetryPolicy.max_retry_after_s",
            self.max_retry_after_s,
            allow_none=False,
            allow_zero=True,
        )

    def backoff(self, attempt: int, u: float) -> float:
        """Seconds before retry number ``attempt`` (1-based), with ``u`` uniform in [0, 1)."""
        cap = min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1))
        return cap * u if self.jitter else cap


RETRY_STATUS = frozenset({408, 409, 429})


def retryable_status(status: int) -> bool:
    return status in RETRY_STATUS or 500 <= status <= 599
