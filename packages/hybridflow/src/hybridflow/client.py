"""The client path: the official ``openai`` SDK (``AsyncOpenAI``) with one retry layer of ours.

Every call streams with ``stream_options={"include_usage": True}`` so that TTFT is measured and the
server's ``usage`` is read. The SDK's own retries are off (``max_retries=0``): :class:`ChatClient`
retries connection errors, timeouts, 408/409/429/5xx and broken streams with jittered backoff, honours
``Retry-After``, and records every attempt with the tokens it was billed (server usage when reported,
a flagged estimate for a cut stream, zero for an error status). A semaphore of
``endpoint.max_concurrency`` matches the httpx pool, so requests queue here, not inside httpx.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import email.utils
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from hybridflow.endpoints import ModelEndpoint, RetryPolicy, retryable_status
from hybridflow.tokens import estimate_chat_tokens, estimate_tokens


def clock() -> float:
    """Seconds on the running event loop's clock: ``time.monotonic()`` on a default loop, the simulated
    servers' clock under :class:`hybridflow.sim.VirtualTimeLoop` (one clock for deadlines, records and r_L)."""
    return asyncio.get_running_loop().time()


@dataclasses.dataclass(frozen=True)
class Attempt:
    """One HTTP attempt: ``outcome`` is "ok", "http_<status>", "timeout", "connection", "broken_stream"
    or "cancelled" (the caller cancelled it mid-stream; tokens estimated)."""

    outcome: str
    prompt_tokens: int
    completion_tokens: int
    estimated: bool
    seconds: float
    cost_usd: float


@dataclasses.dataclass(frozen=True)
class Completion:
    """A finished call: text, the billed tokens of all attempts, and timings of the last one."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    usage_estimated: bool
    ttft_s: float
    latency_s: float
    queue_s: float
    attempts: tuple[Attempt, ...]

    @property
    def cost_usd(self) -> float:
        return sum(a.cost_usd for a in self.attempts)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class CallFailed(RuntimeError):
    """All attempts failed (or the error was not retryable); ``attempts`` holds what was billed."""

    def __init__(self, message: str, attempts: Sequence[Attempt], queue_s: float = 0.0) -> None:
        super().__init__(message)
        self.attempts = tuple(attempts)
        self.queue_s = queue_s


class _BrokenStream(Exception):
    def __init__(self, text: str, why: str, *, timeout: bool = False) -> None:
        super().__init__(why)
        self.text = text
        self.timeout = timeout


def retry_after_s(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date), if present."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):  # not seconds, not an HTTP date ("soon"): absent
        return None
    if parsed is None:
        return None
    if parsed.tzinfo is None:  # an HTTP date is GMT; a naive one would not compare with time.time()
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    return max(0.0, parsed.timestamp() - time.time())


def _import_openai() -> Any:
    try:
        import httpx
        import openai
    except ModuleNotFoundError as error:
        raise ModuleNotFoundError(
            f"the client path needs the module {error.name!r} (not installed): "
            "pip install 'hybridflow[openai]' installs openai and httpx",
            name=error.name,
        ) from error
    return openai, httpx


class ChatClient:
    """Streaming chat completions against one endpoint, with retries and per-attempt billing."""

    def __init__(
        self,
        endpoint: ModelEndpoint,
        retry: RetryPolicy | None = None,
        *,
        seed: int | None = None,
        transport: Any = None,
    ) -> None:
        openai, httpx = _import_openai()
        self.endpoint = endpoint
        self.retry = retry or RetryPolicy()
        self._openai = openai
        self._httpx = httpx
        timeout = httpx.Timeout(endpoint.read_timeout_s, connect=endpoint.connect_timeout_s)
        limits = httpx.Limits(
            max_connections=endpoint.max_concurrency,
            max_keepalive_connections=endpoint.max_concurrency,
        )
        self._http = httpx.AsyncClient(timeout=timeout, limits=limits, transport=transport)
        self.sdk = openai.AsyncOpenAI(
            base_url=endpoint.base_url,
            api_key=endpoint.api_key,
            max_retries=0,
            timeout=timeout,
            http_client=self._http,
        )
        self._slots = asyncio.Semaphore(endpoint.max_concurrency)
        self._rng = np.random.default_rng(seed)
        self.calls = 0

    async def aclose(self) -> None:
        await self.sdk.close()
        await self._http.aclose()

    async def __aenter__(self) -> ChatClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        max_tokens: int | None = None,
        deadline: float | None = None,
        on_text: Callable[[str], None] | None = None,
        retry_after_text: bool = True,
        on_attempt: Callable[[Attempt], None] | None = None,
        may_retry: Callable[[], bool] | None = None,
    ) -> Completion:
        """One chat completion; ``deadline`` is a :func:`clock` instant after which no retry starts.

        ``on_text`` gets each streamed piece. With ``retry_after_text=False`` a stream that broke after
        delivering text is not retried (the planner: its parsed steps are already running).
        ``on_attempt`` gets every attempt as soon as it is billed (so a caller cancelled mid-retry
        still knows what was spent); ``may_retry`` is asked right before each retry is sent (the
        pipeline re-reserves the budget there) and a False ends the call with :class:`CallFailed`.
        The concurrency slot is held per attempt, not across backoff sleeps.
        """
        if getattr(asyncio.get_running_loop(), "simulated_clock", False):
            # Its clock jumps past every timeout while a socket waits, so each call would "time out".
            raise RuntimeError(
                f"{self.endpoint.name}: ChatClient talks to real sockets, which need the wall clock; "
                "hybridflow.sim.run_virtual / VirtualTimeLoop serve in-process simulated clients only "
                "(client_factory=sim_client_factory(...)); use asyncio.run here"
            )
        msgs = [dict(m) for m in messages]
        cap = max_tokens or self.endpoint.max_tokens
        attempts: list[Attempt] = []
        queue_s = 0.0

        def billed(attempt: Attempt) -> None:
            attempts.append(attempt)
            if on_attempt is not None:
                on_attempt(attempt)

        for number in range(1, self.retry.attempts + 1):
            if number > 1 and may_retry is not None and not may_retry():
                raise CallFailed(
                    f"{self.endpoint.name}: the budget cannot cover retry {number}",
                    attempts,
                    queue_s,
                )
            delivered: list[str] = []
            sink = self._sink(delivered, on_text)
            queued = clock()
            async with self._slots:
                queue_s += clock() - queued
                try:
                    text, usage, ttft, seconds = await self._once(msgs, cap, sink)
                except asyncio.CancelledError:
                    # Cancelled mid-stream (the query's deadline): the server bills the prompt and
                    # what it streamed, so the bill keeps an estimate of both before unwinding.
                    if delivered:
                        billed(self._estimated_attempt("cancelled", msgs, "".join(delivered)))
                    raise
                except (self._openai.APIError, self._httpx.TransportError, _BrokenStream) as error:
                    attempt, wait, retryable = self._failed_attempt(error, msgs, "".join(delivered))
                    billed(attempt)
                    if not retryable or (delivered and not retry_after_text):
                        why = attempt.outcome + (" after text" if delivered else "")
                        raise CallFailed(
                            f"{self.endpoint.name}: {why}: {error}", attempts, queue_s
                        ) from error
                else:
                    prompt, completion, estimated = usage
                    cost = self.endpoint.cost(prompt, completion)
                    billed(Attempt("ok", prompt, completion, estimated, seconds, cost))
                    self.calls += 1
                    return Completion(
                        text, sum(a.prompt_tokens for a in attempts), sum(a.completion_tokens for a in attempts),
                        any(a.estimated for a in attempts if a.prompt_tokens or a.completion_tokens),
                        ttft, seconds, queue_s, tuple(attempts),
                    )  # fmt: skip
            if number == self.retry.attempts:
                break
            delay = self.retry.backoff(number, float(self._rng.random()))
            if wait is not None:
                delay = min(wait, self.retry.max_retry_after_s)
            if deadline is not None and clock() + delay >= deadline:
                raise CallFailed(
                    f"{self.endpoint.name}: deadline reached before retry {number + 1}",
                    attempts,
                    queue_s,
                )
            await asyncio.sleep(delay)
        last = attempts[-1].outcome
        raise CallFailed(
            f"{self.endpoint.name}: {len(attempts)} attempts failed (last: {last})",
            attempts,
            queue_s,
        )

    @staticmethod
    def _sink(delivered: list[str], on_text: Callable[[str], None] | None) -> Callable[[str], None]:
        def sink(piece: str) -> None:
            delivered.append(piece)
            if on_text is not None:
                on_text(piece)

        return sink

    def _failed_attempt(
        self, error: Exception, msgs: list[dict[str, str]], text: str
    ) -> tuple[Attempt, float | None, bool]:
        """What a failed attempt was billed, the server's Retry-After, and whether to retry."""
        if isinstance(error, self._openai.APIStatusError):
            status = error.status_code
            wait = retry_after_s(error.response.headers)
            return Attempt(f"http_{status}", 0, 0, False, 0.0, 0.0), wait, retryable_status(status)
        if isinstance(error, _BrokenStream):
            outcome = "timeout" if error.timeout else "broken_stream"
            text = error.text
        elif isinstance(error, (self._openai.APITimeoutError, self._httpx.TimeoutException)):
            outcome = "timeout"
        elif isinstance(error, (self._openai.APIConnectionError, self._httpx.TransportError)):
            outcome = "connection"
        else:  # another SDK error (a malformed response): not a transient fault
            return Attempt("error", 0, 0, False, 0.0, 0.0), None, False
        return self._estimated_attempt(outcome, msgs, text), None, True

    def _estimated_attempt(self, outcome: str, msgs: list[dict[str, str]], text: str) -> Attempt:
        """A stream that ended after content is billed for the prompt and what was sent; the server
        reports no usage then, so both are estimates. One that ended before any content: nothing."""
        prompt = estimate_chat_tokens(msgs) if text else 0
        completion = estimate_tokens(text)
        return Attempt(
            outcome, prompt, completion, True, 0.0, self.endpoint.cost(prompt, completion)
        )

    async def _once(
        self, msgs: list[dict[str, str]], cap: int, sink: Callable[[str], None]
    ) -> tuple[str, tuple[int, int, bool], float, float]:
        start = clock()
        ttft = float("nan")
        pieces: list[str] = []
        usage = None
        finished = False
        stream = await self.sdk.chat.completions.create(
            model=self.endpoint.name,
            messages=msgs,
            max_tokens=cap,
            stream=True,
            stream_options={"include_usage": True},
        )
        try:
            async for chunk in stream:
                if chunk.usage is not None:
                    usage = chunk.usage
                for choice in chunk.choices:
                    piece = choice.delta.content if choice.delta is not None else None
                    if piece:
                        if not pieces:
                            ttft = clock() - start
                        pieces.append(piece)
                        sink(piece)
                    if choice.finish_reason is not None:
                        finished = True
        except (self._openai.APITimeoutError, self._httpx.TimeoutException) as error:
            raise _BrokenStream("".join(pieces), "read timeout", timeout=True) from error
        except (self._openai.APIConnectionError, self._httpx.TransportError) as error:
            raise _BrokenStream("".join(pieces), f"{type(error).__name__}: {error}") from error
        finally:
            await stream.close()
        text = "".join(pieces)
        if not finished:
            raise _BrokenStream(text, "the stream ended without a finish_reason")
        if usage is not None:
            counts = (int(usage.prompt_tokens), int(usage.completion_tokens), False)
        else:
            counts = (estimate_chat_tokens(msgs), estimate_tokens(text), True)
        return text, counts, ttft if pieces else clock() - start, clock() - start
