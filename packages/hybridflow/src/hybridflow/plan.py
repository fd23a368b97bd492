"""The plan: ``<Step .../>`` tags parsed incrementally from a token stream into a DAG of subtasks.

The planner writes ``<Plan><Step ID="1" Task="..." Difficulty="4" Token="50" Rely=""/>...</Plan>``.
:class:`TaskDAG` parses complete tags as chunks arrive (``feed``), so steps become dispatchable while
the planner is still writing. Each parsed step is sanitised as the official code does:

* the step with ID 1 relies on nothing;
* a dependency on an ID >= the step's own (a forward or self reference, which could deadlock) replaces
  the whole Rely list by "all previous steps";
* a missing or unreadable Difficulty becomes 5 (and values are clipped to 1..9);
* switches: ``sequential`` (Rely := all previous steps, or only the previous one with
  ``single_rely``), ``use_difficulty=False`` (Difficulty := 5), ``random_threshold`` (Difficulty :=
  threshold +- 1 at random).

Our additions, so that a malformed plan never hangs: a dependency on a lower ID that never appears is
dropped when the plan closes (recorded in ``repairs``); a tag without a usable ID or Task, a duplicate
ID, a non-integer Rely entry or an unterminated tag raises :class:`PlanError` naming the tag.
"""

from __future__ import annotations

import dataclasses
import html
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

_STEP_START = re.compile(r"<Step\b")
# Attribute-aware: a quoted value may hold '>' or '/>', so a partial tag never matches early.
_STEP_TAG = re.compile(r"""<Step((?:\s+[A-Za-z_]\w*\s*=\s*(?:"[^"]*"|'[^']*'))*)\s*/>""")
_ATTR = re.compile(r"""([A-Za-z_]\w*)\s*=\s*(?:"([^"]*)"|'([^']*)')""")
_PLAN_END = "</Plan>"
DEFAULT_DIFFICULTY = 5


class PlanError(ValueError):
    """A plan that cannot be repaired; ``tag`` is the offending text."""

    def __init__(self, message: str, tag: str = "") -> None:
        super().__init__(f"{message}: {tag!r}" if tag else message)
        self.tag = tag


@dataclasses.dataclass(frozen=True)
class Subtask:
    """One step of the plan. ``deps`` are the IDs of the steps whose results it needs."""

    id: int
    task: str
    deps: tuple[int, ...] = ()
    difficulty: int | None = None
    token_hint: int | None = None

    def __post_init__(self) -> None:
        if self.id < 1:
            raise ValueError(f"Subtask id must be >= 1, got {self.id}")
        if any(d >= self.id for d in self.deps):
            raise ValueError(f"Subtask {self.id} relies on {self.deps}: only lower IDs are allowed")


def _parse_int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        return None


def _token_hint(value: str | None) -> int | None:
    """The planner's Token estimate; a negative or zero one is no estimate (dropped, not kept)."""
    hint = _parse_int(value)
    return hint if hint is not None and hint > 0 else None


class TaskDAG:
    """An incrementally parsed plan.

    >>> dag = TaskDAG.from_plan_xml('<Plan><Step ID="1" Task="a?" Rely=""/>'
    ...                             '<Step ID="2" Task="b?" Rely="1"/></Plan>')
    >>> [s.deps for s in dag.steps]
    [(), (1,)]
    """

    def __init__(
        self,
        *,
        sequential: bool = False,
        single_rely: bool = False,
        use_difficulty: bool = True,
        random_threshold: int | None = None,
        rng: np.random.Generator | int | None = None,
        max_steps: int = 32,
    ) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.sequential = sequential
        self.single_rely = single_rely
        self.use_difficulty = use_difficulty
        self.random_threshold = random_threshold
        self.max_steps = max_steps
        self._rng = np.random.default_rng(rng)
        self._buffer = ""
        self._by_id: dict[int, Subtask] = {}
        self.steps: list[Subtask] = []
        self.closed = False
        self.repairs: list[str] = []
        # Called with the new steps after each feed that parsed some, and with [] on close.
        self.listeners: list[Callable[[list[Subtask]], None]] = []

    # -- parsing -------------------------------------------------------------------------------
    @classmethod
    def from_plan_xml(cls, text: str, **options: object) -> TaskDAG:
        """Parse a whole plan at once (same result as feeding it in any chunks, then ``close``)."""
        dag = cls(**options)  # type: ignore[arg-type]
        dag.feed(text)
        dag.close()
        return dag

    @classmethod
    def from_steps(cls, steps: Iterable[Subtask]) -> TaskDAG:
        """A closed DAG from hand-built subtasks (validated)."""
        dag = cls()
        for step in steps:
            dag._add(step, tag=f"Subtask({step.id})")
        dag.closed = True
        return dag.validate()

    def feed(self, chunk: str) -> list[Subtask]:
        """Parse the complete ``<Step/>`` tags that ``chunk`` completes; return the new steps."""
        if self.closed:
            raise PlanError("feed() after close()")
        self._buffer += chunk
        new: list[Subtask] = []
        while True:
            start = _STEP_START.search(self._buffer)
            if start is None:
                # Keep a tail that could be the beginning of "<Step".
                cut = self._buffer.rfind("<")
                self._buffer = self._buffer[cut:] if cut >= 0 else ""
                return self._notify(new)
            match = _STEP_TAG.match(self._buffer, start.start())
            if match is None:
                rest = self._buffer[start.end() :]
                if _STEP_START.search(rest) or _PLAN_END in rest:
                    end = rest.find(">")
                    raise PlanError(
                        "malformed <Step> tag", self._buffer[start.start() : start.end() + end + 1]
                    )
                self._buffer = self._buffer[start.start() :]
                return self._notify(new)
            new.append(self._parse_tag(match.group(0), match.group(1)))
            self._buffer = self._buffer[match.end() :]

    def _notify(self, new: list[Subtask]) -> list[Subtask]:
        if new:
            for listener in self.listeners:
                listener(new)
        return new

    def close(self, *, drop_partial: bool = False) -> list[str]:
        """The plan has ended: drop dependencies that never appeared; return the repairs made.

        An unterminated tag raises :class:`PlanError`, or is dropped (and recorded) with
        ``drop_partial`` -- for a planner stream that was cut mid-tag.
        """
        if self.closed:
            return self.repairs
        if _STEP_START.search(self._buffer):
            if not drop_partial:
                raise PlanError("unterminated <Step> tag", self._buffer.strip()[:200])
            self.repairs.append(
                f"dropped a partial tag cut by the stream: {self._buffer.strip()[:60]!r}"
            )
        self.closed = True
        known = set(self._by_id)
        for i, step in enumerate(self.steps):
            missing = [d for d in step.deps if d not in known]
            if missing:
                kept = tuple(d for d in step.deps if d in known)
                self.repairs.append(f"step {step.id}: dropped unknown Rely {missing}")
                fixed = dataclasses.replace(step, deps=kept)
                self.steps[i] = fixed
                self._by_id[step.id] = fixed
        for listener in self.listeners:
            listener([])
        return self.repairs

    def _parse_tag(self, tag: str, attr_text: str) -> Subtask:
        attrs = {
            m.group(1): m.group(2) if m.group(2) is not None else m.group(3)
            for m in _ATTR.finditer(attr_text)
        }
        step_id = _parse_int(attrs.get("ID"))
        if step_id is None or step_id < 1:
            raise PlanError("a <Step> needs an integer ID >= 1", tag)
        task = html.unescape(attrs.get("Task") or "").strip()
        if not task:
            raise PlanError(f"step {step_id} has no Task", tag)
        deps = self._sanitised_deps(step_id, attrs.get("Rely", ""), tag)
        difficulty = self._difficulty(step_id, attrs.get("Difficulty"))
        step = Subtask(step_id, task, deps, difficulty, _token_hint(attrs.get("Token")))
        self._add(step, tag)
        return step

    def _sanitised_deps(self, step_id: int, rely: str, tag: str) -> tuple[int, ...]:
        previous = tuple(range(1, step_id))
        if self.sequential:
            if self.single_rely:
                return (step_id - 1,) if step_id > 1 else ()
            return previous
        if step_id == 1:
            return ()
        entries = [e.strip() for e in rely.split(",") if e.strip()]
        deps: list[int] = []
        for entry in entries:
            value = _parse_int(entry)
            if value is None:
                raise PlanError(f"step {step_id}: Rely entry {entry!r} is not an integer ID", tag)
            deps.append(value)
        if any(d >= step_id for d in deps):
            return previous
        return tuple(sorted(set(d for d in deps if d >= 1)))

    def _difficulty(self, step_id: int, raw: str | None) -> int:
        if self.random_threshold is not None:
            t = self.random_threshold
            return int(self._rng.choice([min(9, t + 1), max(1, t - 1)]))
        if not self.use_difficulty:
            return DEFAULT_DIFFICULTY
        value = _parse_int(raw)
        if value is None:
            if raw is not None:  # present but unreadable ("hard"): repaired, and recorded
                self.repairs.append(
                    f"step {step_id}: Difficulty {raw!r} is not an integer, read as {DEFAULT_DIFFICULTY}"
                )
            return DEFAULT_DIFFICULTY
        clipped = min(9, max(1, value))
        if clipped != value:
            self.repairs.append(f"step {step_id}: Difficulty {value} clipped to {clipped}")
        return clipped

    def _add(self, step: Subtask, tag: str) -> None:
        if step.id in self._by_id:
            raise PlanError(f"duplicate step ID {step.id}", tag)
        if len(self.steps) >= self.max_steps:
            raise PlanError(f"the plan has more than max_steps={self.max_steps} steps", tag)
        self._by_id[step.id] = step
        self.steps.append(step)

    # -- structure -----------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, step_id: int) -> Subtask:
        return self._by_id[step_id]

    def __contains__(self, step_id: object) -> bool:
        return step_id in self._by_id

    @property
    def ids(self) -> list[int]:
        return [s.id for s in self.steps]

    @property
    def last_id(self) -> int | None:
        """The final ("Generate") step's ID once the plan is closed; None while it is open."""
        return max(self._by_id) if self.closed and self._by_id else None

    def validate(self) -> TaskDAG:
        """Check that every dependency exists and the graph is acyclic; return self."""
        for step in self.steps:
            for d in step.deps:
                if d not in self._by_id:
                    raise PlanError(f"step {step.id} relies on unknown step {d}")
        # Dependencies point to lower IDs (Subtask enforces it), so the graph is acyclic.
        return self

    def edges(self) -> list[tuple[int, int]]:
        return [(d, s.id) for s in self.steps for d in s.deps]

    def transitive_reduction(self) -> dict[int, tuple[int, ...]]:
        """Each step's dependencies less those implied through another dependency."""
        ancestors = self._ancestors()
        reduced = {}
        for step in self.steps:
            implied = set().union(*(ancestors[d] for d in step.deps)) if step.deps else set()
            reduced[step.id] = tuple(d for d in step.deps if d not in implied)
        return reduced

    def _ancestors(self) -> dict[int, set[int]]:
        ancestors: dict[int, set[int]] = {}
        for step in sorted(self.steps, key=lambda s: s.id):
            ancestors[step.id] = (
                set().union(*({d} | ancestors[d] for d in step.deps)) if step.deps else set()
            )
        return ancestors

    def levels(self) -> dict[int, int]:
        """Topological level of each step (1 for steps without dependencies)."""
        level: dict[int, int] = {}
        for step in sorted(self.steps, key=lambda s: s.id):
            level[step.id] = 1 + max((level[d] for d in step.deps), default=0)
        return level

    def depth(self) -> int:
        """Steps on the longest dependency chain (networkx's dag_longest_path_length + 1)."""
        return max(self.levels().values(), default=0)

    def critical_path(self, durations: Mapping[int, float] | None = None) -> list[int]:
        """The IDs of the longest chain, weighted by ``durations`` (each step 1 if omitted)."""
        if not self.steps:
            return []
        weight = {s.id: 1.0 if durations is None else float(durations[s.id]) for s in self.steps}
        finish: dict[int, float] = {}
        parent: dict[int, int | None] = {}
        for step in sorted(self.steps, key=lambda s: s.id):
            best = max(step.deps, key=lambda d: finish[d], default=None)
            finish[step.id] = weight[step.id] + (finish[best] if best is not None else 0.0)
            parent[step.id] = best
        node: int | None = max(finish, key=lambda i: finish[i])
        path = []
        while node is not None:
            path.append(node)
            node = parent[node]
        return path[::-1]

    def compression_ratio(self) -> float:
        """Critical-path depth over the number of steps (lower = more parallel; 1 = a chain)."""
        if not self.steps:
            raise PlanError("compression_ratio of an empty plan")
        return self.depth() / len(self.steps)

    def to_xml(self) -> str:
        """The plan as ``<Plan>`` XML (round-trips through :meth:`from_plan_xml`)."""
        lines = ["<Plan>"]
        for s in self.steps:
            token = "" if s.token_hint is None else f' Token="{s.token_hint}"'
            diff = "" if s.difficulty is None else f' Difficulty="{s.difficulty}"'
            rely = ",".join(map(str, s.deps))
            task = html.escape(s.task, quote=True)
            lines.append(f'<Step ID="{s.id}" Task="{task}"{diff}{token} Rely="{rely}"/>')
        lines.append("</Plan>")
        return "\n".join(lines)


def ready_steps(dag: TaskDAG, started: Sequence[int] | set[int], done: set[int]) -> list[Subtask]:
    """Steps not started whose dependencies are all done, in dispatch order (#deps, ID)."""
    started_set = set(started)
    ready = [s for s in dag.steps if s.id not in started_set and all(d in done for d in s.deps)]
    return sorted(ready, key=lambda s: (len(s.deps), s.id))
