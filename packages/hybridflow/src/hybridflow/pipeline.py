"""HybridFlow: plan (streamed), schedule the DAG on an asyncio loop, route each step, aggregate.

The scheduler dispatches ready steps (parsed, not started, every dependency finished) in (#deps, ID)
order with at most ``max_workers`` in flight; a step that failed after its retries still counts as
finished (its dependents see "(this step failed)"), unless ``fail_fast``. When all steps are done the
edge model aggregates the results into the answer. ``deadline_s`` cancels what is still running.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, Literal

from hybridflow.accounting import BudgetLedger, HybridFlowResult, Reservation, StepRecord
from hybridflow.chat import check_history, with_history
from hybridflow.client import Attempt, CallFailed, ChatClient, clock
from hybridflow.endpoints import Budget, ModelEndpoint, RetryPolicy
from hybridflow.plan import PlanError, Subtask, TaskDAG, ready_steps
from hybridflow.planners import CallablePlanner, LLMPlanner, RulePlanner, planner_messages
from hybridflow.router import (
    ConstantRouter,
    QueryRouter,
    RandomRouter,
    RouteDecision,
    StepRouter,
    ThresholdRouter,
    UtilityRouter,
)
from hybridflow.tokens import bound_chat_tokens

STEP_SYSTEM = (
    "There is a problem to solve. Here is the problem:\n{problem}\n\n"
    "It has been broken down into smaller sub-problems. You will get one of them, with the results of "
    "the sub-problems it relies on. Solve it and answer concisely."
)
AGGREGATE_PROMPT = (
    "Based on the results of all steps below, please provide only the final answer. No other "
    "explanations or details are needed.\n\nPROBLEM:\n{problem}\n\nSOLUTION STEPS:\n{steps}"
)
FAILED_RESULT = "(this step failed)"


class StepFailed(RuntimeError):
    """Raised by ``fail_fast=True`` when a step fails; ``record`` says how."""

    def __init__(self, record: StepRecord) -> None:
        super().__init__(f"step {record.id} ({record.route}) failed: {record.error}")
        self.record = record


def step_messages(
    query: str, step: Subtask, dag: TaskDAG, results: dict[int, str]
) -> list[dict[str, str]]:
    """System: the problem. User: the sub-question plus the Task and Result of its direct dependencies."""
    user = (
        f"The sub-problem to solve now is: {step.task}\nPlease provide a concise and clear answer."
    )
    if step.deps:
        lines = [
            f"Task {d}: {dag[d].task} ;\nResult: {results.get(d, FAILED_RESULT)}" for d in step.deps
        ]
        user += "\nCONTEXT (results from prior steps):\n" + "\n".join(lines)
    return [
        {"role": "system", "content": STEP_SYSTEM.format(problem=query)},
        {"role": "user", "content": user},
    ]


def aggregate_messages(query: str, dag: TaskDAG, results: dict[int, str]) -> list[dict[str, str]]:
    steps = "\n".join(
        f"Step {s.id}: {s.task}\n{results.get(s.id, FAILED_RESULT)}\n" for s in dag.steps
    )
    return [{"role": "user", "content": AGGREGATE_PROMPT.format(problem=query, steps=steps)}]


def _as_router(router: Any, seed: int | None) -> StepRouter | QueryRouter:
    if isinstance(router, str):
        named: dict[str, Callable[[], Any]] = {
            "edge": lambda: ConstantRouter("edge"),
            "cloud": lambda: ConstantRouter("cloud"),
            "threshold": lambda: ThresholdRouter(),
            "random": lambda: RandomRouter(seed=seed),
        }
        if router not in named:
            raise ValueError(
                f"router must be a router object or one of {sorted(named)}, got {router!r}"
            )
        return named[router]()
    if isinstance(router, UtilityRouter) and router.layers_ is None:
        raise ValueError(
            "the UtilityRouter is not fitted: fit(profiles) or UtilityRouter.load(path) first"
        )
    if isinstance(router, QueryRouter) and router.coef_ is None:
        raise ValueError("the QueryRouter is not fitted: fit(queries, labels) first")
    if not (hasattr(router, "route") or isinstance(router, QueryRouter)):
        raise TypeError(
            f"router must have route(...) or be a QueryRouter, got {type(router).__name__}"
        )
    return router


class HybridFlow:
    """Edge-cloud subtask routing over OpenAI-compatible endpoints.

    ``planner``: a :class:`ModelEndpoint` (streamed LLM planning with the official prompt), a planner
    object (:class:`RulePlanner`, the default), or a callable returning plan XML / subtasks.
    ``router``: a :class:`UtilityRouter`, a baseline router, a :class:`QueryRouter` (whole query to one
    model, no plan), or "edge" / "cloud" / "threshold" / "random". ``chain=True`` is the sequential
    ablation (every step relies on all previous ones).
    """

    def __init__(
        self,
        edge: ModelEndpoint,
        cloud: ModelEndpoint,
        router: Any = "threshold",
        *,
        planner: Any = None,
        max_workers: int = 4,
        retry: RetryPolicy | None = None,
        budget: Budget | None = None,
        deadline_s: float | None = None,
        fail_fast: bool = False,
        chain: bool = False,
        single_rely: bool = False,
        step_max_tokens: int | None = None,
        empty_plan_target: Literal["edge", "cloud"] = "cloud",
        seed: int | None = 0,
        client_factory: Callable[[ModelEndpoint, RetryPolicy], Any] | None = None,
        time_scale: float = 1.0,
    ) -> None:
        if not isinstance(max_workers, int) or max_workers < 1:
            raise ValueError(f"max_workers must be an int >= 1, got {max_workers!r}")
        if deadline_s is not None and not deadline_s > 0:
            raise ValueError(f"deadline_s must be > 0 or None, got {deadline_s!r}")
        if empty_plan_target not in ("edge", "cloud"):
            raise ValueError(
                f"empty_plan_target must be 'edge' or 'cloud', got {empty_plan_target!r}"
            )
        for name, ep in {"edge": edge, "cloud": cloud}.items():
            if not isinstance(ep, ModelEndpoint):
                raise TypeError(f"{name} must be a ModelEndpoint, got {type(ep).__name__}")
        self.edge, self.cloud = edge, cloud
        self.router = _as_router(router, seed)
        self.planner_spec: Any = RulePlanner() if planner is None else planner
        if not (
            isinstance(self.planner_spec, ModelEndpoint)
            or hasattr(self.planner_spec, "plan")
            or callable(self.planner_spec)
        ):
            raise TypeError(
                f"planner must be a ModelEndpoint, a planner or a callable, got {type(planner).__name__}"
            )
        self.max_workers = max_workers
        self.retry = retry or RetryPolicy()
        self.budget = budget
        self.deadline_s = deadline_s
        self.fail_fast = fail_fast
        self.chain, self.single_rely = chain, single_rely
        self.step_max_tokens = step_max_tokens
        self.empty_plan_target = empty_plan_target
        self.seed = seed
        if step_max_tokens is not None and not (
            isinstance(step_max_tokens, int) and step_max_tokens >= 1
        ):
            raise ValueError(
                f"step_max_tokens must be an int >= 1 or None, got {step_max_tokens!r}"
            )
        if not time_scale > 0:
            raise ValueError(f"time_scale must be > 0, got {time_scale!r}")
        self.time_scale = time_scale
        self._client_factory = client_factory or (
            lambda ep, retry: ChatClient(ep, retry, seed=seed)
        )
        self._clients: dict[tuple[str, str], ChatClient] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- clients -------------------------------------------------------------------------------
    def _client(self, which: str) -> Any:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # clients (httpx pools) belong to one event loop
            self._clients, self._loop = {}, loop
        ep = {"edge": self.edge, "cloud": self.cloud}.get(which) or self.planner_spec
        # Keyed on the endpoint, so roles sharing one endpoint share its client and its
        # max_concurrency (two clients would double the in-flight limit).
        key = (ep.name, ep.base_url)
        if key not in self._clients:
            self._clients[key] = self._client_factory(ep, self.retry)
        return self._clients[key]

    async def aclose(self) -> None:
        """Close the HTTP clients of the current event loop."""
        clients, self._clients = self._clients, {}
        for client in clients.values():
            await client.aclose()

    def _planner(self) -> Any:
        spec = self.planner_spec
        if isinstance(spec, ModelEndpoint):
            return LLMPlanner(self._client("planner"))
        if hasattr(spec, "plan"):
            return spec
        return CallablePlanner(spec)

    # -- entry points --------------------------------------------------------------------------
    def run(self, query: str, *, history: Sequence[Any] | None = None) -> HybridFlowResult:
        """Synchronous :meth:`arun` (its own event loop; clients are closed afterwards)."""

        async def once() -> HybridFlowResult:
            try:
                return await self.arun(query, history=history)
            finally:
                await self.aclose()

        return asyncio.run(once())

    async def arun_many(
        self, queries: Sequence[str], *, concurrency: int = 16
    ) -> list[HybridFlowResult]:
        """Run queries with at most ``concurrency`` in flight; results in input order."""
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        gate = asyncio.Semaphore(concurrency)

        async def one(q: str) -> HybridFlowResult:
            async with gate:
                try:
                    return await self.arun(q)
                except Exception as error:
                    # One bad query must not abort the batch: it ends with a reported failure.
                    return _failed_result(q, error)

        tasks = [asyncio.ensure_future(one(q)) for q in queries]
        try:
            return list(await asyncio.gather(*tasks))
        finally:  # cancelled from outside: no query task outlives the call
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def arun(self, query: str, *, history: Sequence[Any] | None = None) -> HybridFlowResult:
        """Answer ``query``; ``history`` (earlier chat turns, OpenAI-style messages) goes into every
        model call between that call's system prompt and its own message (see :mod:`hybridflow.chat`)."""
        if not isinstance(query, str) or not query.strip():
            raise ValueError(f"query must be a non-empty string, got {query!r}")
        return await _Query(self, query, check_history(history)).run()


def _failed_result(query: str, error: BaseException) -> HybridFlowResult:
    """The result of a query that raised: no answer, the error in ``flags`` and ``error``."""
    result = HybridFlowResult(
        query, None, [], None, [f"error: {type(error).__name__}: {error}"], 0.0
    )
    result.error = error
    return result


class _Charge:
    """The budget side of one call: a reservation per attempt, settled as attempts are billed.

    The first reservation is made before dispatch; before each retry the attempts billed so far are
    settled and a fresh upper bound is reserved, so retries can never take the ledger past a cap.
    """

    def __init__(self, query: _Query, res: Reservation, reserve: Callable[[], Any]) -> None:
        self.ledger, self.res, self.reserve = query.ledger, res, reserve
        self.attempts: list[Attempt] = []
        self.settled = 0

    def _settle(self) -> None:
        new = self.attempts[self.settled :]
        self.settled = len(self.attempts)
        tokens = sum(a.prompt_tokens + a.completion_tokens for a in new)
        cost = sum(a.cost_usd for a in new)
        self.ledger.settle(self.res, tokens, cost)
        self.res = Reservation(0, 0, 0.0, self.res.cloud)

    def rereserve(self) -> bool:
        self._settle()
        res = self.reserve()
        if res is None:
            return False
        self.res = res
        return True

    def close(self, record: StepRecord) -> None:
        self._settle()
        record.bill(self.attempts)


class _Query:
    """The state of one query: DAG, results, records, ledger, clock."""

    def __init__(
        self, flow: HybridFlow, query: str, history: Sequence[dict[str, str]] = ()
    ) -> None:
        self.flow, self.query, self.history = flow, query, history
        self.t0 = clock()
        self.deadline = None if flow.deadline_s is None else self.t0 + flow.deadline_s
        self.ledger = BudgetLedger(flow.budget)
        self.dag = TaskDAG(sequential=flow.chain, single_rely=flow.single_rely)
        self.results: dict[int, str] = {}
        self.records: list[StepRecord] = []
        self.flags: list[str] = []

    def now(self) -> float:
        return clock() - self.t0

    async def run(self) -> HybridFlowResult:
        try:
            return self._result(await self._answer())
        except asyncio.TimeoutError:
            self.flags.append("deadline")
            for r in self.records:
                if r.status == "pending":
                    r.status, r.error, r.end_s = "cancelled", "deadline", self.now()
            return self._result(None)

    async def _bounded(self, coro: Any) -> Any:
        """Await ``coro`` within what is left of the query's deadline (TimeoutError past it)."""
        if self.deadline is None:
            return await coro
        return await asyncio.wait_for(coro, max(0.0, self.deadline - clock()))

    async def _answer(self) -> str | None:
        flow = self.flow
        if isinstance(flow.router, QueryRouter):
            target = flow.router.route_query(self.query)
            return await self._bounded(self._direct(target, "query_router"))
        await self._schedule()
        if not self.dag.steps:
            self.flags.append("empty_plan")
            return await self._bounded(self._direct(flow.empty_plan_target, "empty_plan"))
        if self.dag.repairs:
            self.flags.append("plan_repaired")
        record = StepRecord(
            max(self.dag.ids) + 1,
            "aggregate",
            "aggregate",
            "edge",
            flow.edge.name,
            rule="aggregate",
        )
        messages = aggregate_messages(self.query, self.dag, self.results)
        text = await self._bounded(self._call(record, "edge", messages))
        if text is None:
            self.flags.append("aggregate_failed")
            text = self.results.get(self.dag.steps[-1].id)
        return text

    def _result(self, answer: str | None) -> HybridFlowResult:
        return HybridFlowResult(self.query, answer, self.records, self.dag, self.flags, self.now())

    async def _direct(self, target: str, rule: str) -> str | None:
        ep = self.flow.edge if target == "edge" else self.flow.cloud
        record = StepRecord(
            0, self.query, "direct", target, ep.name, rule=rule, p_cloud=float(target == "cloud")
        )
        return await self._call(record, target, [{"role": "user", "content": self.query}])

    # -- scheduling ----------------------------------------------------------------------------
    async def _schedule(self) -> None:
        flow = self.flow
        changed = asyncio.Event()
        planner = flow._planner()
        plan_record = None
        if isinstance(planner, LLMPlanner):
            plan_record = StepRecord(
                0, "plan", "plan", "planner", flow.planner_spec.name, rule="plan"
            )
            self.records.append(plan_record)

        self._ready_at: dict[int, float] = {}

        def on_steps(new: list[Subtask]) -> None:
            stamp = self.now()
            for step in new:
                self._ready_at.setdefault(step.id, stamp)
            changed.set()

        self.dag.listeners.append(on_steps)
        plan_task = asyncio.ensure_future(self._plan(planner, plan_record))
        running: dict[asyncio.Future[Any], int] = {}
        started: set[int] = set()
        done: set[int] = set()
        try:
            while True:
                if plan_task.done() and plan_task.exception() is not None:
                    raise plan_task.exception()  # type: ignore[misc]
                if self.dag.closed and len(done) == len(self.dag):
                    return
                for step in ready_steps(self.dag, started, done)[: flow.max_workers - len(running)]:
                    started.add(step.id)
                    running[asyncio.ensure_future(self._step(step))] = step.id
                waiting: set[asyncio.Future[Any]] = set(running)
                if not plan_task.done():
                    waiting.add(plan_task)
                changed.clear()
                waiter = asyncio.ensure_future(changed.wait())
                timeout = None if self.deadline is None else self.deadline - clock()
                if timeout is not None and timeout <= 0:
                    raise asyncio.TimeoutError
                try:
                    finished, _ = await asyncio.wait(
                        waiting | {waiter}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                    )
                finally:
                    waiter.cancel()
                if not finished:
                    raise asyncio.TimeoutError
                for fut in finished:
                    if fut in running:
                        done.add(running.pop(fut))
                        fut.result()  # StepFailed under fail_fast
        except BaseException:
            for fut, step_id in running.items():
                fut.cancel()
                self._mark_cancelled(step_id)
            plan_task.cancel()
            # Shielded: a second cancellation must not leave these tasks outliving the query.
            await asyncio.shield(asyncio.gather(*running, plan_task, return_exceptions=True))
            raise

    def _mark_cancelled(self, step_id: int) -> None:
        for r in self.records:
            if r.kind == "step" and r.id == step_id and r.status == "pending":
                r.status, r.error, r.end_s = "cancelled", "deadline", self.now()

    async def _plan(self, planner: Any, record: StepRecord | None) -> None:
        res = None
        if record is not None:  # a model call: reserve its bound like any other call
            ep = self.flow.planner_spec
            res = self._reserve(
                ep, "planner", planner_messages(self.query, self.history), planner.max_tokens
            )
            if res is None:
                record.status, record.error = "budget", "the budget cannot cover the planner call"
                self.flags.append("planner_failed")
                self.dag.close()
                return
        charge = None
        if res is not None:
            ep = self.flow.planner_spec
            messages = planner_messages(self.query, self.history)
            charge = _Charge(
                self, res, lambda: self._reserve(ep, "planner", messages, planner.max_tokens)
            )
        try:
            if charge is None:
                await planner.plan(
                    self.query, self.dag, deadline=self.deadline, record=record, t0=self.t0,
                    history=self.history,
                )  # fmt: skip
            else:
                await planner.plan(
                    self.query, self.dag, deadline=self.deadline, record=record, t0=self.t0,
                    history=self.history, on_attempt=charge.attempts.append, may_retry=charge.rereserve,
                )  # fmt: skip
        except CallFailed as error:
            if record is not None:
                record.status, record.error = "failed", str(error)
            self.flags.append("planner_failed")
            self.dag.close(drop_partial=True)
        except PlanError:
            if record is not None:
                record.status = "failed"
            raise
        else:
            if record is not None:
                record.status = "ok"
        finally:
            if charge is not None and record is not None:
                charge.close(record)

    async def _step(self, step: Subtask) -> None:
        flow = self.flow
        is_last = step.id == self.dag.last_id
        decision = self._route(step, is_last)
        ep = flow.cloud if decision.target == "cloud" else flow.edge
        record = StepRecord(
            step.id, step.task, "step", decision.target, ep.name, rule=decision.rule,
            s=decision.s, delta=decision.delta, p_cloud=decision.p_cloud, ready_s=self._ready_at.get(step.id, self.now()),
        )  # fmt: skip
        messages = step_messages(self.query, step, self.dag, self.results)
        text = await self._call(
            record, decision.target, messages, fallback=decision.target == "cloud"
        )
        if text is None:
            if flow.fail_fast:
                raise StepFailed(record)
            return
        self.results[step.id] = text

    def _route(self, step: Subtask, is_last: bool) -> RouteDecision:
        # r_B reads the tokens billed so far (as the official code does), not reservations:
        # parallel steps dispatched together see the same budget use.
        try:
            return self.flow.router.route(  # type: ignore[union-attr]
                self.query,
                step,
                tokens_used=self.ledger.tokens,
                elapsed_s=self.now() / self.flow.time_scale,
                is_last=is_last,
            )
        except (RuntimeError, OSError) as error:
            # The official rule: a router that cannot decide sends the step to the cloud (recorded).
            self.flags.append(f"router_error: {error}")
            return RouteDecision("cloud", 1.0, rule="router_error")

    # -- one call with budget reservation ------------------------------------------------------
    async def _call(
        self,
        record: StepRecord,
        target: str,
        messages: list[dict[str, str]],
        *,
        fallback: bool = False,
    ) -> str | None:
        flow = self.flow
        messages = with_history(messages, self.history)
        self.records.append(record)
        ep = flow.cloud if target == "cloud" else flow.edge
        cap = flow.step_max_tokens or ep.max_tokens
        res = self._reserve(ep, target, messages, cap)
        if res is None and fallback:
            target, ep, record.rule = "edge", flow.edge, "budget"
            record.route, record.model = "edge", ep.name
            cap = flow.step_max_tokens or ep.max_tokens
            res = self._reserve(ep, target, messages, cap)
        if res is None:
            record.status, record.error = (
                "budget",
                "the budget cannot cover this call's upper bound",
            )
            record.start_s = record.end_s = self.now()
            return None
        record.start_s = self.now()
        charge = _Charge(self, res, lambda: self._reserve(ep, target, messages, cap))
        try:
            completion = await self._client_for(target).complete(
                messages,
                max_tokens=cap,
                deadline=self.deadline,
                on_attempt=charge.attempts.append,
                may_retry=charge.rereserve,
            )
        except CallFailed as error:
            record.status, record.error, record.queue_s = "failed", str(error), error.queue_s
            return None
        except asyncio.CancelledError:
            record.status, record.error = "cancelled", "deadline"
            raise
        else:
            record.status, record.result = "ok", completion.text
            record.ttft_s, record.latency_s, record.queue_s = (
                completion.ttft_s,
                completion.latency_s,
                completion.queue_s,
            )
            return completion.text
        finally:
            # Every billed attempt stays on the record, also when the call was cancelled mid-retry.
            charge.close(record)
            record.end_s = self.now()

    def _client_for(self, target: str) -> Any:
        return self.flow._client(target)

    def _reserve(
        self, ep: ModelEndpoint, target: str, messages: list[dict[str, str]], cap: int
    ) -> Reservation | None:
        bound = bound_chat_tokens(messages)
        return self.ledger.reserve(
            bound + cap, cloud=target == "cloud", cost_usd=ep.cost(bound, cap)
        )


__all__ = ["HybridFlow", "StepFailed", "planner_messages"]
