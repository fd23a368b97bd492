"""Chat history: earlier turns reach every model call, through arun and through serve()."""

import asyncio
from typing import ClassVar

import pytest
from hybridflow import HybridFlow, serve
from hybridflow.chat import check_history, with_history
from hybridflow.server import split_conversation
from hybridflow.sim import CLOUD, EDGE, PLANNER, LocalServer, SimClient, answer_of, make_tasks

HISTORY = [
    {"role": "system", "content": "Answer tersely."},
    {"role": "user", "content": "What is 2 + 2?"},
    {"role": "assistant", "content": "4"},
]


def test_with_history_inserts_turns_after_one_system_message():
    call = [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}]
    assert with_history(call, check_history(HISTORY)) == [
        {"role": "system", "content": "S\n\nAnswer tersely."},
        HISTORY[1],
        HISTORY[2],
        {"role": "user", "content": "Q"},
    ]
    assert with_history(call[1:], check_history(HISTORY[1:])) == [*HISTORY[1:], call[1]]
    assert with_history(call, ()) is call


@pytest.mark.parametrize(
    ("messages", "error", "match"),
    [
        ([{"role": "tool", "content": "x"}], ValueError, r"messages\[0\] has role 'tool'"),
        ([{"role": "user", "content": 3}], ValueError, r"messages\[0\] content must be a str"),
        (["hi"], TypeError, r"messages\[0\] must be a dict"),
        ([], ValueError, "non-empty list"),
        ([*HISTORY], ValueError, "last message must be a non-empty user message, got role 'assistant'"),
    ],
)  # fmt: skip
def test_split_conversation_refuses_bad_messages(messages, error, match):
    with pytest.raises(error, match=match):
        split_conversation(messages)


class Recording(SimClient):
    """A simulated client that keeps every message list it was sent."""

    sent: ClassVar[list] = []

    async def complete(self, messages, **kw):
        Recording.sent.append([dict(m) for m in messages])
        return await super().complete(messages, **kw)


def _flow(sim_server):
    from hybridflow.sim import sim_endpoints

    eps = sim_endpoints(sim_server)
    models = {m.name: m for m in (EDGE, CLOUD, PLANNER)}
    factory = lambda ep, retry: Recording(ep, models, time_scale=0.001)  # noqa: E731
    return HybridFlow(
        eps["edge"], eps["cloud"], "threshold", planner=eps["planner"], client_factory=factory
    )


def test_serve_carries_the_conversation_into_every_call(sim_server):
    openai = pytest.importorskip("openai")
    task = make_tasks(1, seed=8)[0]
    Recording.sent = []
    with LocalServer(serve(_flow(sim_server))) as front:

        async def go():
            client = openai.AsyncOpenAI(base_url=front.base_url, api_key="EMPTY", max_retries=0)
            try:
                reply = await client.chat.completions.create(
                    model="hybridflow", messages=[*HISTORY, {"role": "user", "content": task.query}]
                )
                with pytest.raises(openai.BadRequestError, match="last message"):
                    await client.chat.completions.create(model="hybridflow", messages=HISTORY)
                return reply.choices[0].message.content
            finally:
                await client.close()

        answer = asyncio.run(go())
    assert answer_of(answer) is not None
    # planner, the steps and the aggregation: every call saw the earlier turns, in order, before its own
    assert len(Recording.sent) == len(task.parts) + 4
    for messages in Recording.sent:
        roles = [m["role"] for m in messages]
        assert messages[roles.index("user")] == HISTORY[1]
        assert messages[roles.index("user") + 1] == HISTORY[2]
        assert messages[-1]["role"] == "user" and messages[-1] != HISTORY[1]
        assert roles.count("system") <= 1 and "Answer tersely." in messages[0]["content"]


def test_arun_without_history_sends_the_calls_unchanged(sim_server):
    task = make_tasks(1, seed=8)[0]
    Recording.sent = []
    flow = _flow(sim_server)
    asyncio.run(flow.arun(task.query))
    assert all(m["content"] != HISTORY[1]["content"] for call in Recording.sent for m in call)
    with pytest.raises(TypeError, match="history must be a list"):
        asyncio.run(flow.arun(task.query, history="hello"))
    Recording.sent = []
    flow.run(task.query, history=HISTORY[1:])  # the sync entry point carries it too
    assert all(call[-3:-1] == HISTORY[1:] for call in Recording.sent)
