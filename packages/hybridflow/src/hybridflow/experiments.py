"""The reproduction's experiments: router training on simulated profiles, and arms over loopback HTTP.

Each arm is a :class:`HybridFlow` (or a direct-answer baseline) run on the same generated tasks against
the simulated servers; correctness draws are keyed by (model, question, sub-problem), so arms that send
the same step to the same model see the same outcome and their differences are paired.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from hybridflow.embedders import HashingEmbedder
from hybridflow.pipeline import HybridFlow, step_messages
from hybridflow.plan import TaskDAG
from hybridflow.router import QueryRouter, UtilityRouter
from hybridflow.sim import (
    CLOUD,
    EDGE,
    ArithmeticTask,
    SimModel,
    answer_of,
    plan_text,
    reply_seconds,
    respond,
    run_virtual,
)
from hybridflow.tokens import estimate_chat_tokens, estimate_tokens
from hybridflow.training import SubtaskProfile

EMBED_DIM = 256
SIM_SEED = 0


def _run_model(model: SimModel, msgs: list[dict[str, str]]) -> tuple[str, int, int, float]:
    text = respond(model, msgs, SIM_SEED)
    completion = estimate_tokens(text)
    return text, estimate_chat_tokens(msgs), completion, reply_seconds(model, completion)


def profiles_for(tasks: Sequence[ArithmeticTask]) -> list[SubtaskProfile]:
    """Every analysis step of each task's plan, run on both simulated models (in process)."""
    out = []
    for task in tasks:
        dag = TaskDAG.from_plan_xml(plan_text(task, SIM_SEED, 1.5))
        explain = respond(CLOUD, step_messages(task.query, dag.steps[0], dag, {}), SIM_SEED)
        for step, part in zip(dag.steps[1:-1], task.parts, strict=False):
            msgs = step_messages(task.query, step, dag, {1: explain})
            e_text, e_prompt, e_comp, e_lat = _run_model(EDGE, msgs)
            c_text, c_prompt, c_comp, c_lat = _run_model(CLOUD, msgs)
            q_e = float(answer_of(e_text) == part.value)
            q_c = float(answer_of(c_text) == part.value)
            out.append(
                SubtaskProfile(
                    task.query,
                    step,
                    False,
                    e_prompt,
                    e_comp,
                    e_lat,
                    c_prompt,
                    c_comp,
                    c_lat,
                    q_e,
                    q_c,
                )
            )
    return out


def train_router(
    profiles: Sequence[SubtaskProfile],
    *,
    shuffle: bool = False,
    seed: int = 0,
    epochs: int = 30,
    **fit_kw: Any,
) -> UtilityRouter:
    """The adaptive router on the profiles; ``shuffle`` permutes the quality labels (a control);
    ``fit_kw`` go to :meth:`UtilityRouter.fit` (e.g. the label's ``lambda_t``, ``lambda_k``)."""
    if shuffle:
        rng = np.random.default_rng(seed + 1)
        q_e = [p.quality_edge for p in profiles]
        q_c = [p.quality_cloud for p in profiles]
        perm = rng.permutation(len(profiles))
        profiles = [
            dataclasses.replace(p, quality_edge=q_e[i], quality_cloud=q_c[i])
            for p, i in zip(profiles, perm, strict=False)
        ]
    router = UtilityRouter(HashingEmbedder(EMBED_DIM), seed=seed)
    # lr 1e-3 rather than the official 1e-4: 30 epochs of ~2k profiles converge with it.
    return router.fit(profiles, epochs=epochs, lr=1e-3, seed=seed, **fit_kw)


def query_router(profiles_tasks: Sequence[ArithmeticTask], seed: int = 0) -> QueryRouter:
    """RouteLLM-style: label = the cloud's direct answer is right and the edge's is wrong."""
    queries = [t.query for t in profiles_tasks]
    labels = []
    for t in profiles_tasks:
        msgs = [{"role": "user", "content": t.query}]
        right = [answer_of(respond(m, msgs, SIM_SEED)) == t.answer for m in (EDGE, CLOUD)]
        labels.append(float(right[1] and not right[0]))
    return QueryRouter(HashingEmbedder(EMBED_DIM)).fit(queries, labels)


@dataclasses.dataclass
class ArmResult:
    """Per-query arrays of one arm."""

    correct: list[float]
    cloud_tokens: list[float]
    cost_usd: list[float]
    latency_s: list[float]
    step_span_s: list[float]
    step_exec_s: list[dict[int, float]]
    plans: list[str]
    failed: int

    def summary(self) -> dict[str, float]:
        return {
            "accuracy": float(np.mean(self.correct)),
            "cloud_tokens": float(np.mean(self.cloud_tokens)),
            "cost_usd": float(np.mean(self.cost_usd)),
            "latency_s": float(np.mean(self.latency_s)),
            "failed": self.failed,
        }


def _span(result: Any) -> float:
    steps = result.steps
    if not steps:
        return float("nan")
    return max(r.end_s for r in steps) - min(r.start_s for r in steps)


def run_arm(
    flow: HybridFlow,
    tasks: Sequence[ArithmeticTask],
    *,
    concurrency: int,
    time_scale: float,
    virtual: bool = False,
) -> dict[str, Any]:
    """Run ``flow`` on ``tasks``; latencies are reported unscaled (divided by ``time_scale``).
    ``virtual`` runs on the simulated clock (:class:`~hybridflow.sim.VirtualTimeLoop`; in-process
    clients only), so routing that reads r_L does not depend on the machine's load."""

    async def go() -> list[Any]:
        try:
            return await flow.arun_many([t.query for t in tasks], concurrency=concurrency)
        finally:
            await flow.aclose()

    results = run_virtual(go()) if virtual else asyncio.run(go())
    arm = ArmResult([], [], [], [], [], [], [], 0)
    for task, r in zip(tasks, results, strict=False):
        arm.correct.append(float(answer_of(r.answer) == task.answer))
        arm.cloud_tokens.append(float(sum(x.total_tokens for x in r.records if x.route == "cloud")))
        arm.cost_usd.append(r.totals()["cost_usd"])
        arm.latency_s.append(r.latency_s / time_scale)
        arm.step_span_s.append(_span(r) / time_scale)
        arm.step_exec_s.append({x.id: (x.end_s - x.start_s) / time_scale for x in r.steps})
        arm.plans.append(r.dag.to_xml() if r.dag is not None else "")
        arm.failed += int(bool(r.failed))
    return dataclasses.asdict(arm)


def predicted_saving(plan_xml: str, exec_s: dict[int, float]) -> float:
    """The latency model's saving of the DAG over the chain: 1 - critical path / sum of steps."""
    dag = TaskDAG.from_plan_xml(plan_xml)
    if not dag.steps or any(s.id not in exec_s for s in dag.steps):
        return float("nan")
    path = dag.critical_path({k: exec_s[k] for k in dag.ids})
    return 1.0 - sum(exec_s[i] for i in path) / sum(exec_s[i] for i in dag.ids)
