"""serve(): a request is validated before any model runs, and its errors stop the SDK's retries."""

import httpx
import pytest
from hybridflow import HybridFlow, ModelEndpoint, serve
from hybridflow.server import split_conversation
from hybridflow.sim import LocalServer

pytest.importorskip("fastapi")

QUESTION = [{"role": "user", "content": "What is 2 + 3?"}]


class Recorder:
    """Stands in for ``flow.arun``: counts the queries it was asked and fails with a named error."""

    def __init__(self):
        self.calls = []

    async def __call__(self, query, history=()):
        self.calls.append((query, history))
        raise RuntimeError("no models in this test")


@pytest.fixture(scope="module")
def _server():
    ep = ModelEndpoint("m", "http://127.0.0.1:9/v1")
    flow = HybridFlow(ep, ep, "threshold", planner=lambda q: "<Plan></Plan>")
    flow.arun = Recorder()
    with LocalServer(serve(flow)) as server:
        yield server, flow.arun


@pytest.fixture
def front(_server):
    _server[1].calls.clear()
    return _server


def test_an_error_is_not_retried_by_the_sdk_and_names_its_cause(front):
    openai = pytest.importorskip("openai")
    server, arun = front
    client = openai.OpenAI(base_url=server.base_url, api_key="x")  # the SDK's default 2 retries
    try:
        with pytest.raises(openai.InternalServerError) as info:
            client.chat.completions.create(model="hybridflow", messages=QUESTION)
    finally:
        client.close()
    assert len(arun.calls) == 1  # one query run, not three
    assert info.value.response.headers["x-should-retry"] == "false"
    assert "RuntimeError: no models in this test" in info.value.body["message"]


@pytest.mark.parametrize(
    ("content", "status", "says"),
    [
        (b"not json", 400, "not JSON"),
        (b"[1, 2]", 400, "JSON object"),
        (b'{"messages": [{"role": "user", "content": "q"}], "stream_options": true}', 400, "stream_options"),
        (b'{"messages": [{"role": "user", "content": "q"}], "stream": "yes"}', 400, "stream"),
        (b'{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}', 400, "image_url"),
        (b'{"model": "gpt-4", "messages": [{"role": "user", "content": "q"}]}', 404, "gpt-4"),
    ],
)  # fmt: skip
def test_a_bad_body_is_refused_before_the_query_runs(front, content, status, says):
    server, arun = front
    r = httpx.post(f"{server.base_url}/chat/completions", content=content, timeout=10)
    assert r.status_code == status and says in r.json()["error"]["message"]
    assert r.headers["x-should-retry"] == "false" and arun.calls == []


def test_text_parts_and_the_developer_role_are_accepted_as_openai_does(front):
    server, arun = front
    messages = [
        {"role": "developer", "content": "Be terse."},
        {"role": "user", "content": [{"type": "text", "text": "What is "}, {"type": "text", "text": "2 + 3?"}]},
    ]  # fmt: skip
    r = httpx.post(f"{server.base_url}/chat/completions", json={"messages": messages}, timeout=10)
    assert r.status_code == 500  # the recorder's error: the body itself was accepted
    assert arun.calls == [("What is 2 + 3?", ({"role": "system", "content": "Be terse."},))]
    assert split_conversation(messages) == arun.calls[0]
