"""The scheduler against the analytic latency model, with in-process models of known step times."""

import asyncio
import itertools
import time

import pytest
from hybridflow import Budget, HybridFlow, ModelEndpoint, StepFailed, TaskDAG, makespan
from hybridflow.pipeline import FAILED_RESULT
from hybridflow.sim import run_virtual

EDGE = ModelEndpoint("edge", "http://127.0.0.1:9/v1")
CLOUD = ModelEndpoint(
    "cloud", "http://127.0.0.1:9/v1", price_in_per_mtok=1.0, price_out_per_mtok=4.0
)
SECONDS = {
    "t1": 0.10,
    "t2": 0.15,
    "t3": 0.25,
    "t4": 0.10,
    "t5": 0.10,
    "t6": 0.05,
    "aggregate": 0.05,
}
PLAN = (
    '<Plan><Step ID="1" Task="t1" Rely=""/><Step ID="2" Task="t2" Rely="1"/><Step ID="3" Task="t3" Rely="1"/>'
    '<Step ID="4" Task="t4" Rely="1"/><Step ID="5" Task="t5" Rely="2,3"/><Step ID="6" Task="t6" Rely="4,5"/></Plan>'
)
EXACT = 1e-9  # on the simulated clock model time is all the time there is
WALL_TOL = 0.25  # the one wall-clock smoke test: timers on a loaded 2-core machine


_FAKE = []


@pytest.fixture(autouse=True)
def _fake(fake_client):
    _FAKE[:] = [fake_client]


def flow(workers, router="edge", seconds=SECONDS, plan=PLAN, **kw):
    clients = {}
    fail = kw.pop("fail", ())

    def factory(ep, retry):
        clients[ep.name] = _FAKE[0](ep, retry, seconds=lambda t: seconds.get(t, 0.0), fail=fail)
        return clients[ep.name]

    hf = HybridFlow(
        EDGE,
        CLOUD,
        router,
        planner=lambda q: plan,
        max_workers=workers,
        client_factory=factory,
        **kw,
    )
    return hf, clients


def run_simulated(hf, query="q"):
    """``hf.run(query)`` on the simulated clock (:func:`hybridflow.sim.run_virtual`): the event loop
    jumps from timer to timer, so timings are exact whatever the machine's load."""

    async def go():
        try:
            return await hf.arun(query)
        finally:
            await hf.aclose()

    return run_virtual(go())


def _schedule(workers):
    dag = TaskDAG.from_plan_xml(PLAN)
    exec_s = {s.id: SECONDS[s.task] for s in dag.steps}
    return makespan(dag, exec_s, workers=None if workers == 8 else workers)


@pytest.mark.parametrize("workers", [1, 2, 8])
def test_makespan_equals_the_analytic_model(workers):
    hf, _ = flow(workers)
    result = run_simulated(hf)
    schedule = _schedule(workers)
    expected = schedule.makespan + SECONDS["aggregate"]
    if workers == 1:
        assert expected == pytest.approx(sum(SECONDS.values()))  # planner (instant) + sum of steps
    assert result.latency_s == pytest.approx(expected, abs=EXACT)
    for rec in result.steps:
        assert rec.start_s == pytest.approx(schedule.start[rec.id], abs=EXACT)


def test_wall_clock_makespan_is_near_the_analytic_model():
    """Smoke test on the real clock (the oracles above run on the simulated one)."""
    hf, _ = flow(8)
    result = hf.run("q")
    expected = _schedule(8).makespan + SECONDS["aggregate"]
    assert result.latency_s == pytest.approx(expected, abs=WALL_TOL)


class StreamingPlanner:
    """Emits one tag every ``gap`` seconds: steps must start while the plan is still streaming."""

    def __init__(self, gap):
        self.gap = gap

    async def plan(self, query, dag, **_):
        for tag in PLAN.replace("/>", "/>\n").splitlines():
            await asyncio.sleep(self.gap)
            dag.feed(tag)
        dag.close()


def test_planning_overlaps_execution_as_the_latency_model_says():
    hf, _ = flow(8)
    hf.planner_spec = StreamingPlanner(0.05)
    result = run_simulated(hf)
    dag = TaskDAG.from_plan_xml(PLAN)
    avail = {s.id: 0.05 * (i + 1) for i, s in enumerate(dag.steps)}
    schedule = makespan(dag, {s.id: SECONDS[s.task] for s in dag.steps}, avail)
    assert result.latency_s == pytest.approx(schedule.makespan + SECONDS["aggregate"], abs=EXACT)
    for rec in result.steps:
        assert rec.start_s == pytest.approx(schedule.start[rec.id], abs=EXACT)
    assert result.steps[0].start_s < 0.05 * len(dag) - 0.05  # step 1 ran before the plan ended


def test_totals_equal_the_sum_of_records_and_cost_is_tokens_times_price():
    hf, _ = flow(4, router="cloud")
    result = hf.run("q")
    totals = result.totals()
    assert totals["total_tokens"] == sum(r.total_tokens for r in result.records)
    cloud = [r for r in result.records if r.route == "cloud"]
    assert totals["cost_usd"] == pytest.approx(
        sum(r.prompt_tokens * 1e-6 + r.completion_tokens * 4e-6 for r in cloud)
    )
    trace = result.chrome_trace()
    assert {e["ph"] for e in trace["traceEvents"]} == {"M", "X"}
    assert len([e for e in trace["traceEvents"] if e["ph"] == "X"]) == len(result.records)


def test_a_failed_step_is_surfaced_and_does_not_block_the_dag():
    hf, _clients = flow(4, fail=("t2",))
    result = hf.run("q")
    assert result.failed == [2] and not result.ok and result.answer is not None
    assert [r.status for r in result.steps].count("ok") == 5
    hf2, _ = flow(4, fail=("t2",), fail_fast=True)
    with pytest.raises(StepFailed, match="step 2"):
        hf2.run("q")


def test_dependents_see_the_failure_in_their_context():
    from hybridflow.pipeline import step_messages

    dag = TaskDAG.from_plan_xml(PLAN)
    msgs = step_messages("q", dag[5], dag, {3: "three"})
    assert FAILED_RESULT in msgs[1]["content"] and "three" in msgs[1]["content"]


def test_deadline_cancels_outstanding_steps():
    slow = dict(SECONDS, t3=5.0)
    hf, _ = flow(8, seconds=slow, deadline_s=0.4)
    t = time.monotonic()
    result = hf.run("q")
    assert time.monotonic() - t < 1.5
    assert "deadline" in result.flags and result.answer is None
    assert {r.id: r.status for r in result.steps}[3] == "cancelled"


def test_empty_plan_falls_back_to_direct_answering():
    hf, _clients = flow(2, plan="<Plan>no steps</Plan>")
    result = hf.run("q")
    assert result.flags == ["empty_plan"] and result.answer is not None
    assert [r.kind for r in result.records] == ["direct"] and result.records[0].route == "cloud"


def test_budget_is_reserved_before_dispatch_and_never_overspent():
    for cap in (300, 600, 1200):
        hf, _ = flow(8, router="cloud", budget=Budget(max_cloud_tokens=cap))
        result = hf.run("q")
        cloud = sum(r.total_tokens for r in result.records if r.route == "cloud")
        assert cloud <= cap
        assert any(r.rule == "budget" for r in result.records)  # fell back to the edge


def test_chain_runs_every_step_after_the_previous():
    hf, _ = flow(8, chain=True)
    result = hf.run("q")
    steps = sorted(result.steps, key=lambda r: r.id)
    assert all(b.start_s >= a.end_s - 1e-3 for a, b in itertools.pairwise(steps))


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"max_workers": 0}, "max_workers"),
        ({"deadline_s": 0}, "deadline_s"),
        ({"router": "bogus"}, "router must"),
    ],
)
def test_bad_settings_raise(kw, needle):
    with pytest.raises(ValueError, match=needle):
        HybridFlow(EDGE, CLOUD, **({"router": "edge"} | kw))
