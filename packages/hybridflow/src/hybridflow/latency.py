"""The analytic latency model of the official ``output_performance.py``, and Gantt traces.

Each model has a first-token latency ``ttft`` and a throughput ``tokens_per_s``; a step takes
``ttft + tokens / tokens_per_s``. Step ``i`` becomes available when the planner has streamed the plan up
to the end of its tag; it starts at ``max(available_i, max_{j in Rely(i)} end_j)``. The official model
ignores the worker limit; :func:`makespan` also simulates a limit with the scheduler's own dispatch rule
(ready steps by (#deps, ID)), which is the oracle the scheduler's tests compare against.
"""

from __future__ import annotations

import dataclasses
import heapq
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hybridflow.plan import TaskDAG


def step_time(tokens: float, ttft_s: float, tokens_per_s: float) -> float:
    """Seconds of one call: first-token latency plus decoding time."""
    if tokens_per_s <= 0:
        raise ValueError(f"tokens_per_s must be > 0, got {tokens_per_s}")
    return ttft_s + tokens / tokens_per_s


@dataclasses.dataclass(frozen=True)
class Schedule:
    start: dict[int, float]
    end: dict[int, float]

    @property
    def makespan(self) -> float:
        return max(self.end.values(), default=0.0)


def makespan(
    dag: TaskDAG,
    exec_s: Mapping[int, float],
    available_s: Mapping[int, float] | None = None,
    *,
    workers: int | None = None,
) -> Schedule:
    """Start and end times of every step: the official model (``workers=None``) or list scheduling.

    ``available_s[i]`` is when the planner has emitted step ``i`` (0 if omitted).
    """
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    avail = {s.id: 0.0 if available_s is None else float(available_s[s.id]) for s in dag.steps}
    start: dict[int, float] = {}
    end: dict[int, float] = {}
    if workers is None:
        for step in sorted(dag.steps, key=lambda s: s.id):
            start[step.id] = max([avail[step.id], *(end[d] for d in step.deps)])
            end[step.id] = start[step.id] + exec_s[step.id]
        return Schedule(start, end)
    # Event-driven list scheduling with the scheduler's dispatch order.
    now = 0.0
    running: list[tuple[float, int]] = []  # a heap of (end, id)
    done: set[int] = set()
    pending = {s.id: s for s in dag.steps}
    while pending or running:
        ready = sorted(
            (s for s in pending.values() if avail[s.id] <= now and all(d in done for d in s.deps)),
            key=lambda s: (len(s.deps), s.id),
        )
        for step in ready[: workers - len(running)]:
            start[step.id], end[step.id] = now, now + exec_s[step.id]
            heapq.heappush(running, (end[step.id], step.id))
            del pending[step.id]
        future = [avail[i] for i in pending if avail[i] > now]
        next_end = running[0][0] if running else float("inf")
        now = min([next_end, *future])
        while running and running[0][0] <= now:
            done.add(heapq.heappop(running)[1])
    return Schedule(start, end)


def chrome_trace(
    spans: Sequence[Mapping[str, Any]], path: str | Path | None = None, *, pid: int = 0
) -> dict[str, Any]:
    """Chrome-trace JSON (``chrome://tracing``, Perfetto) from spans with name/lane/start_s/end_s.

    Each span may carry ``args`` (shown on click). Written to ``path`` when given.
    """
    lanes = sorted({str(s["lane"]) for s in spans})
    events: list[dict[str, Any]] = [
        {"name": "thread_name", "ph": "M", "pid": pid, "tid": i, "args": {"name": lane}}
        for i, lane in enumerate(lanes)
    ]
    for span in spans:
        events.append(
            {
                "name": str(span["name"]),
                "ph": "X",
                "pid": pid,
                "tid": lanes.index(str(span["lane"])),
                "ts": round(float(span["start_s"]) * 1e6, 1),
                "dur": round((float(span["end_s"]) - float(span["start_s"])) * 1e6, 1),
                "args": dict(span.get("args", {})),
            }
        )
    trace = {"traceEvents": events, "displayTimeUnit": "ms"}
    if path is not None:
        Path(path).write_text(json.dumps(trace, indent=1))
    return trace
