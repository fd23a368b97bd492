"""Planners: an LLM prompted with the Explain-Analyze-Generate prompt, a rule-based one, or a callable.

A planner fills a :class:`TaskDAG` (``feed`` as text streams, then ``close``) and returns the record of
its call (None when no model was called). The paper serves a fine-tuned Qwen3-1.7B planner; without it,
any chat model with :data:`PLANNER_PROMPT` or the rule-based planner stands in.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from hybridflow.chat import with_history
from hybridflow.client import clock
from hybridflow.plan import Subtask, TaskDAG

EXPLAIN_TASK = (
    "To assist the following agents, what is your understanding of the question after reviewing it, "
    "focusing only on essential information and filtering out all irrelevant details?"
)
GENERATE_TASK = (
    "After reviewing the original question and the thoughts of previous agents, what is the final "
    "answer to the question?"
)

# The official planner prompt's rules, condensed: the fixed first and last questions, maximally
# independent analysis steps, Difficulty 1-9 for choosing between a small and a large model.
PLANNER_PROMPT = f"""You analyse a problem and write a structured XML plan in the Explain-Analyze-Generate framework.
The plan is executed in parallel by two models: a small, fast edge model (procedural, well-defined
steps) and a large cloud model (deep reasoning, expert knowledge). Difficulty (1-9) says which one a
step needs: low for the small model, high for the large one.

1. Step 1 (Explain), ID="1", Rely="": Task="{EXPLAIN_TASK}"
2. Analyze steps: the smallest possible independent sub-questions, each a self-contained question
   ending with "?", that do not leak answers. Maximise parallelism: rely on step 1 (Rely="1") unless a
   step truly needs another step's result.
3. The final Generate step relies on the analysis steps: Task="{GENERATE_TASK}"
The plan has fewer than 7 steps.

Write only:
<Plan>
<Step ID="1" Task="..." Difficulty="4" Token="50" Rely=""/>
<Step ID="2" Task="...?" Difficulty="3" Token="30" Rely="1"/>
...
</Plan>
Attributes: ID (integer), Task, Difficulty (1-9), Token (expected answer length), Rely (IDs, comma separated).
"""

PlanFn = Callable[[str], "str | Sequence[Subtask] | Awaitable[str | Sequence[Subtask]]"]


def planner_messages(query: str, history: Sequence[dict[str, str]] = ()) -> list[dict[str, str]]:
    messages = [
        {"role": "system", "content": PLANNER_PROMPT},
        {"role": "user", "content": f"Problem:\n{query}"},
    ]
    return with_history(messages, history)


_CLAUSE = re.compile(r"[;\n]+|(?<=[.?!])\s+(?=[A-Z])")


def rule_plan(query: str, *, max_analysis: int = 5) -> str:
    """A plan without a model: Explain, one analysis step per clause of the query, Generate.

    Clauses are split on ``;``, newlines and sentence ends; the last clause is taken as the question
    the Generate step answers. Difficulty grows with the clause's length and digits (a crude guess).
    """
    clauses = [c.strip() for c in _CLAUSE.split(query) if c and c.strip()]
    analysis = clauses[:-1] if len(clauses) > 1 else []
    analysis = analysis[:max_analysis]
    lines = ["<Plan>", f'<Step ID="1" Task="{EXPLAIN_TASK}" Difficulty="3" Token="40" Rely=""/>']
    for i, clause in enumerate(analysis, start=2):
        digits = sum(ch.isdigit() for ch in clause)
        difficulty = min(9, 1 + digits // 2 + len(clause.split()) // 8)
        task = clause.replace('"', "'")
        lines.append(
            f'<Step ID="{i}" Task="{task}" Difficulty="{difficulty}" Token="30" Rely="1"/>'
        )
    last = len(analysis) + 2
    rely = ",".join(str(i) for i in range(2, last)) or "1"
    lines.append(
        f'<Step ID="{last}" Task="{GENERATE_TASK}" Difficulty="4" Token="30" Rely="{rely}"/>'
    )
    lines.append("</Plan>")
    return "\n".join(lines)


class RulePlanner:
    """:func:`rule_plan` as a planner (no model call)."""

    def __init__(self, max_analysis: int = 5) -> None:
        if max_analysis < 0:
            raise ValueError(f"max_analysis must be >= 0, got {max_analysis}")
        self.max_analysis = max_analysis

    async def plan(self, query: str, dag: TaskDAG, **_: Any) -> None:
        dag.feed(rule_plan(query, max_analysis=self.max_analysis))
        dag.close()


class CallablePlanner:
    """``fn(query)`` returns plan XML or a list of :class:`Subtask` (sync or async)."""

    def __init__(self, fn: PlanFn) -> None:
        if not callable(fn):
            raise TypeError(f"CallablePlanner needs a callable, got {type(fn).__name__}")
        self.fn = fn

    async def plan(self, query: str, dag: TaskDAG, **_: Any) -> None:
        out = self.fn(query)
        if inspect.isawaitable(out):
            out = await out
        if isinstance(out, str):
            dag.feed(out)
        else:
            for step in out:
                dag.feed(_step_xml(step))
        dag.close()


def _step_xml(step: Subtask) -> str:
    one = TaskDAG()
    one.steps.append(step)
    return one.to_xml().splitlines()[1]


class LLMPlanner:
    """Stream a plan from a chat model; steps are fed to the DAG as their tags complete.

    Used through :class:`hybridflow.HybridFlow`, which supplies the client (``planner=`` an endpoint).
    """

    def __init__(self, client: Any, *, max_tokens: int = 768) -> None:
        self.client = client
        self.max_tokens = max_tokens

    async def plan(
        self,
        query: str,
        dag: TaskDAG,
        *,
        deadline: float | None = None,
        record: Any = None,
        t0: float | None = None,
        on_attempt: Any = None,
        may_retry: Any = None,
        history: Sequence[dict[str, str]] = (),
    ) -> None:
        """Stream the plan into ``dag``. With ``on_attempt`` the caller bills the record itself."""
        start = clock()
        hooks = {} if on_attempt is None else {"on_attempt": on_attempt, "may_retry": may_retry}
        try:
            completion = await self.client.complete(
                planner_messages(query, history),
                max_tokens=self.max_tokens,
                deadline=deadline,
                on_text=dag.feed,
                retry_after_text=False,
                **hooks,
            )
        except Exception as error:
            if record is not None and on_attempt is None and hasattr(error, "attempts"):
                record.bill(error.attempts)
            raise
        finally:
            if record is not None and t0 is not None:
                record.start_s, record.end_s = start - t0, clock() - t0
        if record is not None:
            if on_attempt is None:
                record.bill(completion.attempts)
            record.ttft_s, record.latency_s, record.queue_s = (
                completion.ttft_s,
                completion.latency_s,
                completion.queue_s,
            )
            record.result = completion.text
        dag.close()
