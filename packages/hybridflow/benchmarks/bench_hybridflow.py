"""HybridFlow benchmark, one run: ``python packages/hybridflow/benchmarks/bench_hybridflow.py [--queries 200]``.

1. Makespan of 200 queries, HybridFlow (DAG) / HybridFlow-Chain / cloud-only, over loopback HTTP to the
   simulated servers (time scaled by ``--scale``; same router, same tasks, same concurrency).
2. Cost and latency at equal accuracy against the query-level (RouteLLM-style) router: the query
   router's threshold is calibrated so its accuracy matches HybridFlow's on the same tasks.
3. Scheduler overhead per step with zero-time in-process models (target < 1 ms), against a plain
   ``asyncio.gather`` of the same calls (``shared_core.bench.compare``, interleaved, median ratio).
4. Router latency: one ``UtilityRouter.route`` (hashing embedding + MLP).

Writes ``bench.json`` next to ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
from hybridflow import HybridFlow, ModelEndpoint, Subtask, ThresholdRouter
from hybridflow.client import Attempt, Completion
from hybridflow.experiments import profiles_for, query_router, run_arm, train_router
from hybridflow.router import QueryRouter
from hybridflow.sim import (
    CLOUD,
    EDGE,
    PLANNER,
    LocalServer,
    make_tasks,
    sim_app,
    sim_client_factory,
    sim_endpoints,
)

from shared_core.bench import compare

MODELS = {m.name: m for m in (EDGE, CLOUD, PLANNER)}


def makespans(n: int, scale: float, *, in_process: bool = False) -> dict[str, Any]:
    """Wall time of ``n`` queries per arm; ``in_process`` swaps HTTP for :class:`SimClient`."""
    tasks = make_tasks(n, seed=77)
    out = {}
    kw: dict[str, Any] = {}
    if in_process:
        kw = {"client_factory": sim_client_factory(MODELS, time_scale=scale), "time_scale": scale}
    with LocalServer(sim_app(MODELS, time_scale=scale)) as server:
        eps = sim_endpoints(server)
        cloud_only = QueryRouter().fit(["a", "b"], [0.0, 1.0]).with_threshold(-np.inf)
        t5 = ThresholdRouter(5)
        arms = {
            "HybridFlow": HybridFlow(
                eps["edge"], eps["cloud"], t5, planner=eps["planner"], max_workers=8, **kw
            ),
            "HybridFlow-Chain": HybridFlow(
                eps["edge"], eps["cloud"], t5, planner=eps["planner"], chain=True, **kw
            ),
            "cloud-only (direct)": HybridFlow(eps["edge"], eps["cloud"], cloud_only, **kw),
        }
        run_arm(arms["HybridFlow"], tasks[:4], concurrency=4, time_scale=scale)  # warm-up
        for name, flow in arms.items():
            t = time.perf_counter()
            res = run_arm(flow, tasks, concurrency=16, time_scale=scale)
            wall = time.perf_counter() - t
            out[name] = {"wall_s": wall, "mean_query_latency_s_unscaled": float(np.mean(res["latency_s"])),
                         "accuracy": float(np.mean(res["correct"])), "cost_usd": float(np.mean(res["cost_usd"]))}  # fmt: skip
    hf = out["HybridFlow"]["wall_s"]
    out["ratios"] = {
        "HybridFlow / Chain": hf / out["HybridFlow-Chain"]["wall_s"],
        "HybridFlow / cloud-only": hf / out["cloud-only (direct)"]["wall_s"],
    }
    return out


def equal_accuracy(n_train: int, n_eval: int, **router_kw: Any) -> dict[str, Any]:
    """In-process clients on the simulated clock: HybridFlow (adaptive) vs the query router calibrated
    to the same accuracy. ``router_kw``: the label (``lambda_t``, ``lambda_k``) and ``tau``/``delta0``."""
    train, tasks = make_tasks(n_train, seed=1000), make_tasks(n_eval, seed=2000)
    settings = {k: router_kw.pop(k) for k in ("tau", "delta0") if k in router_kw}
    router = train_router(profiles_for(train), **router_kw)
    for name, value in settings.items():
        setattr(router, name, value)
    eps = {k: ModelEndpoint(m.name, "http://127.0.0.1:9/v1", price_in_per_mtok=p[0], price_out_per_mtok=p[1])
           for k, m, p in (("edge", EDGE, (0, 0)), ("cloud", CLOUD, (2.0, 8.0)), ("planner", PLANNER, (0, 0)))}  # fmt: skip
    factory = sim_client_factory(MODELS, time_scale=1.0)

    def arm(r: Any, planner: bool = True) -> dict[str, Any]:
        flow = HybridFlow(
            eps["edge"],
            eps["cloud"],
            r,
            planner=eps["planner"],
            client_factory=factory,
            max_workers=8,
        )
        # the simulated clock: r_L reads model seconds, not this machine's load
        return run_arm(flow, tasks, concurrency=8, time_scale=1.0, virtual=True)

    hf = arm(router)
    target = float(np.mean(hf["correct"]))
    qr = query_router(train)
    best = None
    for frac in np.linspace(0.0, 1.0, 11):
        res = arm(QueryRouter.calibrate(qr, [t.query for t in train], float(frac)))
        acc = float(np.mean(res["correct"]))
        if acc >= target and best is None:
            best = {"cloud_fraction": float(frac), "accuracy": acc, "cost_usd": float(np.mean(res["cost_usd"])),
                    "latency_s": float(np.mean(res["latency_s"]))}  # fmt: skip
    ours = {
        "accuracy": target,
        "cost_usd": float(np.mean(hf["cost_usd"])),
        "latency_s": float(np.mean(hf["latency_s"])),
    }
    ratios = {} if best is None else {"cost HybridFlow / query router": ours["cost_usd"] / best["cost_usd"],
                                      "latency HybridFlow / query router": ours["latency_s"] / best["latency_s"]}  # fmt: skip
    return {"hybridflow": ours, "query_router_at_equal_accuracy": best, "ratios": ratios}


class ZeroClient:
    def __init__(self, ep: ModelEndpoint, retry: Any) -> None:
        self.ep = ep

    async def complete(self, messages: Any, **_: Any) -> Completion:
        await asyncio.sleep(0)
        return Completion("ok", 1, 1, False, 0.0, 0.0, 0.0, (Attempt("ok", 1, 1, False, 0.0, 0.0),))

    async def aclose(self) -> None:
        return None


def scheduler_overhead(n_queries: int = 200) -> dict[str, Any]:
    plan = "".join(
        f'<Step ID="{i}" Task="t{i}" Rely="{"1" if 1 < i < 6 else ("" if i == 1 else "2,3,4,5")}"/>'
        for i in range(1, 7)
    )
    ep = ModelEndpoint("m", "http://127.0.0.1:9/v1")
    flow = HybridFlow(
        ep, ep, "edge", planner=lambda q: plan, max_workers=8, client_factory=ZeroClient
    )
    client = ZeroClient(ep, None)
    calls = n_queries * 7  # 6 steps + aggregation

    def ours() -> None:
        async def go() -> None:
            await flow.arun_many(["q"] * n_queries, concurrency=16)

        asyncio.run(go())

    def bare() -> None:
        async def go() -> None:
            await asyncio.gather(*(client.complete([]) for _ in range(calls)))

        asyncio.run(go())

    cmp = compare(
        ours,
        bare,
        name="HybridFlow scheduler",
        baseline_name="asyncio.gather of the same calls",
        repeats=5,
        warmup=1,
    )
    return {"per_step_ms": cmp.candidate_s / calls * 1e3, "bare_per_call_ms": cmp.baseline_s / calls * 1e3,
            "ratio": cmp.ratio, "comparison": str(cmp)}  # fmt: skip


def router_latency(n: int = 500) -> dict[str, Any]:
    router = train_router(profiles_for(make_tasks(50, seed=5)), epochs=2)
    step = Subtask(3, "What is x2 = 4581 * 97?", (1,), 5, 30)
    times = []
    for _ in range(n):
        t = time.perf_counter()
        router.route(
            "Let x1 = 3 * 4; x2 = 4581 * 97. What is x1 + x2?", step, tokens_used=100, elapsed_s=1.0
        )
        times.append(time.perf_counter() - t)
    return {
        "median_ms": statistics.median(times) * 1e3,
        "p99_ms": float(np.percentile(times, 99)) * 1e3,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument(
        "--scale",
        type=float,
        default=0.5,
        help="time scale of the loopback HTTP makespans (>= 0.5: model time above the ~20 ms CPU per call)",
    )
    # 200 queries at concurrency 16 keep the event loop busy: a slower clock keeps model time dominant
    ap.add_argument(
        "--sim-scale", type=float, default=0.2, help="time scale of the in-process makespans"
    )
    ap.add_argument("--out", type=Path, default=Path("bench-out"))
    parts = ("overhead", "router", "makespan_in_process", "makespan_http", "equal_accuracy",
             "equal_accuracy_quality_label")  # fmt: skip
    ap.add_argument("--only", nargs="*", choices=parts, default=list(parts))
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    jobs = {
        "overhead": lambda: scheduler_overhead(),
        "router": lambda: router_latency(),
        # the scheduler's makespan: in-process simulated clients, so model time dominates
        "makespan_in_process": lambda: makespans(a.queries, a.sim_scale, in_process=True),
        # the whole client path over loopback HTTP (CPU-bound on a loaded 2-core machine)
        "makespan_http": lambda: makespans(a.queries, a.scale),
        "equal_accuracy": lambda: equal_accuracy(500, 400),
        "equal_accuracy_quality_label": lambda: equal_accuracy(
            500, 400, lambda_t=0.0, lambda_k=0.0, tau=0.02, delta0=0.4
        ),
    }
    result = {name: jobs[name]() for name in a.only}
    (a.out / "bench.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
