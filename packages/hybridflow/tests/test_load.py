"""A bounded load loop on 127.0.0.1: it stops by itself and leaves no task or connection behind."""

import asyncio
import time

import numpy as np
import pytest
from hybridflow import Budget, HybridFlow
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


def _load(n_queries, concurrency, limit_s):
    faults = Faults(p_500=0.03, p_429=0.03, retry_after_s=0.01, p_cut=0.03, seed=1)
    app = sim_app({m.name: m for m in (EDGE, CLOUD, PLANNER)}, time_scale=0.005, faults=faults)
    budget = Budget(max_cloud_tokens=1500)
    with LocalServer(app) as server:
        eps = sim_endpoints(server, max_concurrency=concurrency)
        hf = HybridFlow(
            eps["edge"],
            eps["cloud"],
            "threshold",
            planner=eps["planner"],
            budget=budget,
            deadline_s=limit_s,
        )
        tasks = make_tasks(n_queries, seed=9)

        async def go():
            t = time.monotonic()
            try:
                results = await asyncio.wait_for(
                    hf.arun_many([x.query for x in tasks], concurrency=concurrency), limit_s
                )
            finally:
                await hf.aclose()
            await asyncio.sleep(0.05)
            leftover = [x for x in asyncio.all_tasks() if x is not asyncio.current_task()]
            return results, time.monotonic() - t, leftover

        results, wall, leftover = asyncio.run(go())
        time.sleep(0.1)
        connections = len(server.server.server_state.connections)
    ledger = app.state.ledger
    assert wall < limit_s and leftover == [] and connections == 0 and ledger.in_flight == 0
    assert len(results) == n_queries
    assert all(
        r.answer is not None or r.failed or r.flags for r in results
    )  # an answer or a reported failure
    assert all(
        sum(x.total_tokens for x in r.records if x.route == "cloud") <= budget.max_cloud_tokens
        for r in results
    )
    assert sum(r.totals()["total_tokens"] for r in results) == ledger.total()
    lat = np.array([r.latency_s for r in results])
    return float(np.percentile(lat, 50)), float(np.percentile(lat, 99))


def test_load_small():
    p50, p99 = _load(12, 8, 30.0)
    assert 0 < p50 <= p99


@pytest.mark.slow
def test_load_200_queries_concurrency_16():
    p50, p99 = _load(200, 16, 60.0)
    print(f"p50 {p50 * 1e3:.0f} ms, p99 {p99 * 1e3:.0f} ms")
