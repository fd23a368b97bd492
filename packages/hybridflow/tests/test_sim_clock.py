"""The simulated clock (r_L from model time, not a loaded CPU's wall time) and the router fixture."""

import asyncio
import itertools
import time

import numpy as np
import pytest
from hybridflow import HybridFlow, ModelEndpoint, ThresholdRouter
from hybridflow.plan import TaskDAG
from hybridflow.sim import (
    CLOUD,
    EDGE,
    PLANNER,
    Part,
    make_tasks,
    plan_text,
    reply_seconds,
    run_virtual,
    sim_client_factory,
)

MODELS = {m.name: m for m in (EDGE, CLOUD, PLANNER)}


def test_the_virtual_loop_sleeps_in_model_time_only():
    async def nap():
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await asyncio.gather(asyncio.sleep(30), asyncio.sleep(10))
        return loop.time() - t0

    wall = time.perf_counter()
    assert run_virtual(nap()) == 30.0
    assert time.perf_counter() - wall < 1.0


class SlowRouter(ThresholdRouter):
    """Burns wall time in every decision (a loaded CPU) and keeps the elapsed_s it was given."""

    def __init__(self, burn_s):
        super().__init__(5)
        self.burn_s, self.seen = burn_s, {}

    def route(self, question, subtask, *, tokens_used, elapsed_s, is_last=False):
        time.sleep(self.burn_s)
        self.seen[subtask.id] = elapsed_s
        return super().route(
            question, subtask, tokens_used=tokens_used, elapsed_s=elapsed_s, is_last=is_last
        )


def _run(router, query):
    eps = [ModelEndpoint(m.name, "http://127.0.0.1:9/v1") for m in (EDGE, CLOUD, PLANNER)]
    flow = HybridFlow(eps[0], eps[1], router, planner=eps[2], max_workers=1,
                      client_factory=sim_client_factory(MODELS, time_scale=1.0))  # fmt: skip

    async def go():
        try:
            return await flow.arun(query)
        finally:
            await flow.aclose()

    return run_virtual(go())


def test_r_l_reads_the_simulated_clock_whatever_the_cpu_load():
    task = make_tasks(1, seed=3, parts=(4, 4))[0]
    idle, busy = SlowRouter(0.0), SlowRouter(0.02)
    a, b = _run(idle, task.query), _run(busy, task.query)
    assert idle.seen == busy.seen and a.latency_s == b.latency_s
    starts = {r.id: r.start_s for r in a.steps}
    assert idle.seen == {k: pytest.approx(starts[k], abs=1e-12) for k in idle.seen}
    # one worker: each step starts when the one before it ends, by the models' own latency model
    steps = sorted(a.steps, key=lambda r: r.id)
    for before, after in itertools.pairwise(steps):
        model = CLOUD if before.route == "cloud" else EDGE
        took = reply_seconds(model, before.completion_tokens)
        assert after.start_s - before.start_s == pytest.approx(took, rel=1e-9)


def test_the_fixture_has_easy_and_hard_steps_the_planner_partly_misjudges():
    long_sum, short_product = Part("x1", 654321, "+", 123456), Part("x2", 37, "*", 12)
    assert long_sum.difficulty == 1 and EDGE.p_correct(1) > 0.95
    assert short_product.difficulty >= 3 and EDGE.p_correct(short_product.difficulty) < 0.75
    assert long_sum.looks_hard > short_product.looks_hard  # what a small planner goes by
    guess, true = [], []
    for task in make_tasks(200, seed=7):
        dag = TaskDAG.from_plan_xml(plan_text(task, 0, 1.5))
        for step, part in zip(dag.steps[1:-1], task.parts, strict=False):
            guess.append(step.difficulty)
            true.append(part.difficulty)
    r = np.corrcoef(guess, true)[0, 1]
    assert (
        0.3 < r < 0.8
    )  # informative, but far from the truth: room for a router that reads the text
    true = np.array(true)
    assert 0.5 < np.mean(true == 1) < 0.8 and np.mean(true >= 4) > 0.15  # mostly easy, some hard


def test_real_sockets_on_the_simulated_clock_raise_clearly():
    from hybridflow import ChatClient, RetryPolicy

    async def go():
        client = ChatClient(ModelEndpoint("m", "http://127.0.0.1:9/v1"), RetryPolicy(), seed=0)
        try:
            await client.complete([{"role": "user", "content": "hi"}])
        finally:
            await client.aclose()

    with pytest.raises(RuntimeError, match="real sockets, which need the wall clock"):
        run_virtual(go())


def test_run_virtual_cancels_the_tasks_left_running():
    left = []

    async def forever():
        try:
            await asyncio.sleep(1e9)
        except asyncio.CancelledError:
            left.append("cancelled")
            raise

    async def go():
        asyncio.get_running_loop().create_task(forever())
        await asyncio.sleep(1.0)
        return "done"

    assert run_virtual(go()) == "done"
    assert left == ["cancelled"]
