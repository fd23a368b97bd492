"""Per-step records, per-query results, and the budget ledger that reserves before dispatch."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hybridflow.client import Attempt
from hybridflow.endpoints import Budget
from hybridflow.latency import chrome_trace
from hybridflow.plan import TaskDAG


@dataclasses.dataclass
class StepRecord:
    """What one call did. Times are seconds since the query began; tokens include failed attempts."""

    id: int
    task: str
    kind: str  # "plan", "step", "aggregate" or "direct"
    route: str  # "edge", "cloud" or "planner"
    model: str
    rule: str | None = None
    s: float = math.nan
    delta: float = math.nan
    p_cloud: float = math.nan
    status: str = "pending"  # "ok", "failed", "cancelled", "budget"
    result: str = ""
    error: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usage_estimated: bool = False
    cost_usd: float = 0.0
    attempts: int = 0
    outcomes: tuple[str, ...] = ()
    ready_s: float = math.nan
    start_s: float = math.nan
    end_s: float = math.nan
    queue_s: float = 0.0
    ttft_s: float = math.nan
    latency_s: float = math.nan

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def bill(self, attempts: Sequence[Attempt]) -> None:
        self.prompt_tokens = sum(a.prompt_tokens for a in attempts)
        self.completion_tokens = sum(a.completion_tokens for a in attempts)
        self.usage_estimated = any(
            a.estimated for a in attempts if a.prompt_tokens or a.completion_tokens
        )
        self.cost_usd = sum(a.cost_usd for a in attempts)
        self.attempts = len(attempts)
        self.outcomes = tuple(a.outcome for a in attempts)


@dataclasses.dataclass
class Reservation:
    tokens: int
    cloud_tokens: int
    cost_usd: float
    cloud: bool = False


class BudgetLedger:
    """Spent and reserved tokens/cost of one query.

    A call reserves an upper bound of what it can be billed (prompt bound + ``max_tokens``) before it
    is sent, and settles to the billed figures when it ends. Reservation happens between awaits, so
    parallel steps of one event loop can never jointly exceed the budget.
    """

    def __init__(self, budget: Budget | None) -> None:
        self.budget = budget or Budget()
        self.tokens = self.cloud_tokens = 0
        self.cost_usd = 0.0
        self.reserved = Reservation(0, 0, 0.0)

    @property
    def committed_and_reserved_tokens(self) -> int:
        return self.tokens + self.reserved.tokens

    def reserve(self, tokens: int, *, cloud: bool, cost_usd: float) -> Reservation | None:
        b, r = self.budget, self.reserved
        if b.max_tokens is not None and self.tokens + r.tokens + tokens > b.max_tokens:
            return None
        if (
            cloud
            and b.max_cloud_tokens is not None
            and self.cloud_tokens + r.cloud_tokens + tokens > b.max_cloud_tokens
        ):
            return None
        if b.max_cost_usd is not None and self.cost_usd + r.cost_usd + cost_usd > b.max_cost_usd:
            return None
        res = Reservation(tokens, tokens if cloud else 0, cost_usd, cloud)
        self.reserved = Reservation(
            r.tokens + res.tokens, r.cloud_tokens + res.cloud_tokens, r.cost_usd + res.cost_usd
        )
        return res

    def settle(self, res: Reservation, tokens: int, cost_usd: float) -> None:
        r = self.reserved
        self.reserved = Reservation(
            r.tokens - res.tokens, r.cloud_tokens - res.cloud_tokens, r.cost_usd - res.cost_usd
        )
        self.tokens += tokens
        self.cloud_tokens += tokens if res.cloud else 0
        self.cost_usd += cost_usd


@dataclasses.dataclass
class HybridFlowResult:
    """One query: the answer (None if none could be produced), every call, flags and totals."""

    query: str
    answer: str | None
    records: list[StepRecord]
    dag: TaskDAG | None
    flags: list[str]
    latency_s: float
    error: BaseException | None = None  # set by arun_many when the query raised

    @property
    def ok(self) -> bool:
        return self.answer is not None and not self.failed and self.error is None

    @property
    def failed(self) -> list[int]:
        return [r.id for r in self.records if r.status not in ("ok",)]

    @property
    def steps(self) -> list[StepRecord]:
        return [r for r in self.records if r.kind == "step"]

    def totals(self) -> dict[str, Any]:
        """Token, cost and call counts summed over every record (failed attempts included)."""
        out: dict[str, Any] = {
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "cost_usd": 0.0,
            "attempts": 0,
        }
        for route in ("edge", "cloud", "planner"):
            out[f"{route}_tokens"] = 0
            out[f"{route}_calls"] = 0
        for r in self.records:
            out["prompt_tokens"] += r.prompt_tokens
            out["completion_tokens"] += r.completion_tokens
            out["cost_usd"] += r.cost_usd
            out["attempts"] += r.attempts
            out[f"{r.route}_tokens"] += r.total_tokens
            out[f"{r.route}_calls"] += 1
        out["total_tokens"] = out["prompt_tokens"] + out["completion_tokens"]
        out["latency_s"] = self.latency_s
        out["usage_estimated"] = any(r.usage_estimated for r in self.records)
        return out

    def gantt(self) -> list[dict[str, Any]]:
        """One span per call with a start, for :func:`hybridflow.latency.chrome_trace`."""
        return [
            {
                "name": f"{r.kind} {r.id}: {r.task[:40]}",
                "lane": r.route,
                "start_s": r.start_s,
                "end_s": r.end_s,
                "args": {
                    "status": r.status,
                    "tokens": r.total_tokens,
                    "p_cloud": r.p_cloud,
                    "queue_s": r.queue_s,
                },
            }
            for r in self.records
            if math.isfinite(r.start_s) and math.isfinite(r.end_s)
        ]

    def chrome_trace(self, path: str | Path | None = None) -> dict[str, Any]:
        return chrome_trace(self.gantt(), path)
