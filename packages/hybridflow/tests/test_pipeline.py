"""End to end over real HTTP: the simulated servers on 127.0.0.1, the OpenAI SDK, serve()."""

import asyncio
import json

import pytest
from hybridflow import Budget, HybridFlow, QueryRouter, serve
from hybridflow.embedders import HashingEmbedder
from hybridflow.sim import LocalServer, answer_of, make_tasks, sim_endpoints


def test_streamed_llm_plan_end_to_end(sim_server, tmp_path):
    eps = sim_endpoints(sim_server)
    task = make_tasks(1, seed=11)[0]
    hf = HybridFlow(eps["edge"], eps["cloud"], "cloud", planner=eps["planner"])
    result = hf.run(task.query)
    assert answer_of(result.answer) is not None and result.flags == []
    kinds = [r.kind for r in result.records]
    assert (
        kinds[0] == "plan"
        and kinds[-1] == "aggregate"
        and kinds.count("step") == len(task.parts) + 2
    )
    plan = result.records[0]
    assert result.steps[0].start_s < plan.end_s  # step 1 started while the plan was streaming
    assert all(r.status == "ok" and not r.usage_estimated for r in result.records)
    assert result.records[-1].route == "edge"  # aggregation on the edge
    totals = result.totals()
    assert totals["total_tokens"] == sum(r.total_tokens for r in result.records)
    assert totals["cloud_tokens"] == sum(r.total_tokens for r in result.steps)
    path = tmp_path / "trace.json"
    result.chrome_trace(path)
    assert len(json.loads(path.read_text())["traceEvents"]) > len(result.records)


def test_query_router_answers_directly(sim_server):
    eps = sim_endpoints(sim_server)
    tasks = make_tasks(30, seed=2)
    qr = QueryRouter(HashingEmbedder(64)).fit(
        [t.query for t in tasks], [len(t.query) % 2 for t in tasks]
    )
    qr.calibrate([t.query for t in tasks], 0.5)
    hf = HybridFlow(eps["edge"], eps["cloud"], qr)
    result = hf.run(tasks[0].query)
    assert [r.kind for r in result.records] == ["direct"]
    assert result.records[0].route == qr.route_query(tasks[0].query)


def test_budget_holds_under_parallel_dispatch_over_http(sim_server):
    eps = sim_endpoints(sim_server)
    task = make_tasks(1, seed=4, parts=(5, 5))[0]
    hf = HybridFlow(
        eps["edge"],
        eps["cloud"],
        "cloud",
        planner=eps["planner"],
        max_workers=8,
        budget=Budget(max_cloud_tokens=900),
    )
    result = hf.run(task.query)
    assert sum(r.total_tokens for r in result.records if r.route == "cloud") <= 900
    assert any(r.rule == "budget" for r in result.records)


def test_serve_is_an_openai_compatible_front_end(sim_server):
    openai = pytest.importorskip("openai")
    eps = sim_endpoints(sim_server)
    task = make_tasks(1, seed=8)[0]
    flow = HybridFlow(eps["edge"], eps["cloud"], "threshold", planner=eps["planner"])
    with LocalServer(serve(flow)) as front:

        async def go():
            client = openai.AsyncOpenAI(base_url=front.base_url, api_key="EMPTY", max_retries=0)
            try:
                stream = await client.chat.completions.create(
                    model="hybridflow", messages=[{"role": "user", "content": task.query}], stream=True,
                    stream_options={"include_usage": True},
                )  # fmt: skip
                pieces, usage = [], None
                async for chunk in stream:
                    usage = chunk.usage or usage
                    pieces += [
                        c.delta.content for c in chunk.choices if c.delta and c.delta.content
                    ]
                models = await client.models.list()
                with pytest.raises(openai.NotFoundError):
                    await client.chat.completions.create(
                        model="gpt-4", messages=[{"role": "user", "content": "x"}]
                    )
                return "".join(pieces), usage, [m.id for m in models.data]
            finally:
                await client.close()

        text, usage, names = asyncio.run(go())
    assert names == ["hybridflow"] and answer_of(text) is not None and usage.total_tokens > 0
