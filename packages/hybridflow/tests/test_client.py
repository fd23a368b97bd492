"""The client path: unit HTTP cases with respx, then a fault-injecting simulated server with a ledger."""

import asyncio
import json
import time

import httpx
import pytest
import respx
from hybridflow import CallFailed, ChatClient, HybridFlow, ModelEndpoint, RetryPolicy
from hybridflow.client import retry_after_s
from hybridflow.tokens import estimate_chat_tokens, estimate_tokens

URL = "http://127.0.0.1:8001/v1"
MSGS = [{"role": "user", "content": "hello there"}]


def sse(text="hi there", usage=True, finish=True):
    def chunk(delta, fin=None, use=None):
        body = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": fin}]}  # fmt: skip
        if use:
            body["usage"] = use
        return f"data: {json.dumps(body)}\n\n"

    out = chunk({"role": "assistant", "content": ""}) + chunk({"content": text})
    if finish:
        out += chunk({}, "stop")
    if usage:
        out += chunk(None, use={"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14})
    return httpx.Response(
        200,
        content=(out + "data: [DONE]\n\n").encode(),
        headers={"content-type": "text/event-stream"},
    )


FAST = RetryPolicy(attempts=3, base_delay_s=0.01)


def call(responses, retry=FAST, **ep):
    async def go():
        with respx.mock(assert_all_called=False) as router:
            route = router.post(f"{URL}/chat/completions").mock(side_effect=responses)
            client = ChatClient(ModelEndpoint("m", URL, **ep), retry, seed=0)
            try:
                return await client.complete(MSGS), route
            finally:
                await client.aclose()

    return asyncio.run(go())


def test_429_with_retry_after_is_honoured():
    t = time.monotonic()
    out, route = call(
        [
            httpx.Response(
                429, headers={"Retry-After": "0.3"}, json={"error": {"message": "slow"}}
            ),
            sse(),
        ]
    )
    assert time.monotonic() - t >= 0.3
    assert [a.outcome for a in out.attempts] == ["http_429", "ok"] and route.call_count == 2
    assert (out.text, out.prompt_tokens, out.completion_tokens, out.usage_estimated) == (
        "hi there",
        11,
        3,
        False,
    )


def test_5xx_and_connection_errors_are_retried_then_reported():
    out, _ = call([httpx.Response(500), httpx.ConnectError("refused"), sse()])
    assert [a.outcome for a in out.attempts] == ["http_500", "connection", "ok"]
    with pytest.raises(CallFailed, match="2 attempts failed") as info:
        call(
            [httpx.Response(503), httpx.Response(502), sse()],
            retry=RetryPolicy(attempts=2, base_delay_s=0.0),
        )
    assert [a.outcome for a in info.value.attempts] == ["http_503", "http_502"]


def test_client_errors_are_not_retried():
    with pytest.raises(CallFailed, match="http_400") as info:
        call([httpx.Response(400, json={"error": {"message": "bad"}}), sse()])
    assert len(info.value.attempts) == 1


def test_a_stream_without_finish_is_broken_and_retried_and_billed_as_estimate():
    out, _ = call([sse("partial", usage=False, finish=False), sse()])
    broken = out.attempts[0]
    assert broken.outcome == "broken_stream" and broken.estimated
    assert broken.completion_tokens == estimate_tokens(
        "partial"
    ) and broken.prompt_tokens == estimate_chat_tokens(MSGS)
    assert out.prompt_tokens == 11 + broken.prompt_tokens  # billed failed attempts are included


def test_missing_usage_is_a_flagged_estimate():
    out, _ = call([sse("four score", usage=False)])
    assert out.usage_estimated and out.completion_tokens == estimate_tokens("four score")


def test_retry_after_parsing():
    assert retry_after_s({"retry-after": "2"}) == 2.0
    assert retry_after_s({"retry-after-ms": "250"}) == 0.25
    assert retry_after_s({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert retry_after_s({}) is None


def test_the_sdk_retries_are_off_under_ours():
    client = asyncio.run(_make())
    assert client.sdk.max_retries == 0
    assert client.sdk.timeout.read == 60.0 and client.sdk.timeout.connect == 5.0


async def _make():
    c = ChatClient(ModelEndpoint("m", URL))
    await c.aclose()
    return c


def test_unreachable_endpoint_is_retried_then_the_step_fails():
    dead = ModelEndpoint("dead", "http://127.0.0.1:9/v1", connect_timeout_s=0.2)
    hf = HybridFlow(dead, dead, "edge", retry=RetryPolicy(attempts=2, base_delay_s=0.01))
    result = hf.run("Let x1 = 2 + 3; x2 = 4 + 5. What is x1 + x2?")
    assert result.answer is None and not result.ok
    assert all(
        r.status == "failed" and r.outcomes == ("connection", "connection") for r in result.records
    )


def test_fault_injecting_server_ledger_matches_client_totals():
    from hybridflow.sim import (
        CLOUD,
        EDGE,
        PLANNER,
        Faults,
        LocalServer,
        make_tasks,
        sim_app,
        sim_endpoints,
    )

    faults = Faults(
        p_500=0.12, p_429=0.12, retry_after_s=0.02, p_stall=0.05, stall_s=1.5, p_cut=0.2, seed=3
    )
    app = sim_app({m.name: m for m in (EDGE, CLOUD, PLANNER)}, time_scale=0.005, faults=faults)
    with LocalServer(app) as server:
        eps = sim_endpoints(server, read_timeout_s=0.5)
        hf = HybridFlow(eps["edge"], eps["cloud"], "threshold", planner=eps["planner"], max_workers=4,
                        retry=RetryPolicy(attempts=4, base_delay_s=0.01))  # fmt: skip

        async def go():
            try:
                return await hf.arun_many([t.query for t in make_tasks(6, seed=5)], concurrency=6)
            finally:
                await hf.aclose()

        results = asyncio.run(go())
    ledger = app.state.ledger
    outcomes = set(ledger.outcomes)
    assert {"http_500", "http_429", "cut", "stall", "ok"} <= outcomes  # every fault was exercised
    client_total = sum(r.totals()["total_tokens"] for r in results)
    assert client_total == ledger.total()
    seen = [o for r in results for rec in r.records for o in rec.outcomes]
    assert {"http_500", "http_429", "broken_stream", "timeout"} <= set(seen)
    assert all(r.answer is not None or r.failed for r in results)


def test_a_stream_cancelled_mid_way_is_billed_as_the_server_bills_it():
    """A deadline that cancels a call after text arrived: the client keeps an estimated attempt of
    the prompt and the text delivered, and that equals what the server billed for the disconnect."""
    from hybridflow.sim import CLOUD, EDGE, PLANNER, LocalServer, make_tasks, sim_app, sim_endpoints

    app = sim_app({m.name: m for m in (EDGE, CLOUD, PLANNER)}, time_scale=1.0)
    msgs = [{"role": "user", "content": make_tasks(1, seed=3, parts=(4, 4))[0].query}]
    with LocalServer(app) as server:
        ep = sim_endpoints(server)["planner"]

        async def go():
            billed, client = [], ChatClient(ep, FAST, seed=0)
            task = asyncio.current_task()
            try:
                await client.complete(
                    msgs, on_text=lambda piece: task.cancel(), on_attempt=billed.append
                )
            except asyncio.CancelledError:
                pass
            finally:
                await client.aclose()
            for _ in range(200):  # the server notices the disconnect on its own loop
                if app.state.ledger.outcomes:
                    break
                await asyncio.sleep(0.01)
            return billed

        billed = asyncio.run(go())
    ledger = app.state.ledger
    assert ledger.outcomes == ["disconnect"]
    assert [a.outcome for a in billed] == ["cancelled"] and billed[0].estimated
    assert billed[0].prompt_tokens == estimate_chat_tokens(msgs)
    assert billed[0].prompt_tokens + billed[0].completion_tokens == ledger.total() > 0
