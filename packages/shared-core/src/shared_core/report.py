"""The reproduction report every ``python -m <package>.reproduce`` writes.

A report holds *claims* (the paper says ours beats a baseline on a metric: did it, here?), tables and
PNG figures, and writes ``result.json`` (machine-readable, the schema below) and ``report.md`` to one
folder. ``held`` is always computed from the measured figures, never written in.

``result.json``::

    {"schema": 1, "package": str, "title": str, "settings": {...}, "created": iso-8601,
     "claims": [{"name", "metric", "ours", "baseline", "baseline_name", "direction",
                 "tolerance", "held", "settings", "note"}],
     "tables": {name: [row, ...]}, "figures": [{"name", "path", "caption"}]}
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

SCHEMA = 1
Direction = Literal["lower", "higher", "close"]
DIRECTIONS: tuple[str, ...] = ("lower", "higher", "close")


def claim_holds(ours: float, baseline: float, direction: str, tolerance: float = 0.0) -> bool:
    """Whether ``ours`` stands to ``baseline`` as ``direction`` expects, within ``tolerance``.

    ``"lower"``: ours <= baseline + tolerance; ``"higher"``: ours >= baseline - tolerance;
    ``"close"``: |ours - baseline| <= tolerance. A NaN on either side never holds.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance!r}")
    if math.isnan(ours) or math.isnan(baseline):
        return False
    if direction == "lower":
        return ours <= baseline + tolerance
    if direction == "higher":
        return ours >= baseline - tolerance
    return abs(ours - baseline) <= tolerance


@dataclasses.dataclass
class Claim:
    """One claim of a paper, measured here.

    ``direction`` says how ``ours`` should compare with ``baseline`` for the claim to hold. ``held``
    is computed by :func:`claim_holds` unless the caller computes a richer criterion itself (say, a
    claim over every case of a sweep) and passes it; ``note`` says why a claim did not hold.
    """

    name: str
    metric: str
    ours: float
    baseline: float
    direction: Direction
    baseline_name: str = "baseline"
    tolerance: float = 0.0
    held: bool | None = None
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)
    note: str = ""

    def __post_init__(self) -> None:
        self.ours = float(self.ours)
        self.baseline = float(self.baseline)
        if self.held is None:
            self.held = claim_holds(self.ours, self.baseline, self.direction, self.tolerance)
        self.held = bool(self.held)


@dataclasses.dataclass
class Figure:
    name: str
    path: str
    caption: str = ""


def _json_default(value: Any) -> Any:
    # numpy and torch scalars and arrays, Paths: everything else is a bug in the caller.
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} to result.json: {value!r}")


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return f"{value:.4g}"
    return str(value)


def subplots(*args: Any, **kwargs: Any) -> Any:
    """``matplotlib.pyplot.subplots`` on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(*args, **kwargs)


class Report:
    """Collects claims, tables and figures, and writes them to ``out``.

    Long runs resume: :meth:`cached` stores each finished step under ``out/checkpoints`` keyed by the
    step name and the report settings, so a rerun with the same ``--out`` and settings skips it.
    """

    def __init__(
        self, package: str, title: str, out: str | Path, settings: Mapping[str, Any] | None = None
    ) -> None:
        self.package = package
        self.title = title
        self.out = Path(out)
        self.settings: dict[str, Any] = dict(settings or {})
        self.claims: list[Claim] = []
        self.tables: dict[str, list[dict[str, Any]]] = {}
        self.figures: list[Figure] = []
        self.created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        self.out.mkdir(parents=True, exist_ok=True)

    # -- content -------------------------------------------------------------------------------
    def claim(
        self,
        name: str,
        metric: str,
        ours: float,
        baseline: float,
        *,
        direction: Direction,
        baseline_name: str = "baseline",
        tolerance: float = 0.0,
        held: bool | None = None,
        settings: Mapping[str, Any] | None = None,
        note: str = "",
    ) -> Claim:
        """Record a claim; see :class:`Claim`."""
        c = Claim(
            name=name,
            metric=metric,
            ours=ours,
            baseline=baseline,
            direction=direction,
            baseline_name=baseline_name,
            tolerance=tolerance,
            held=held,
            settings=dict(settings or {}),
            note=note,
        )
        self.claims.append(c)
        return c

    def table(self, name: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """Record a table as a list of rows (dicts with the same keys)."""
        self.tables[name] = [dict(r) for r in rows]

    def figure(self, name: str, fig: Any, caption: str = "") -> Path:
        """Save a matplotlib figure as ``out/<name>.png``, close it and record it."""
        import matplotlib.pyplot as plt

        path = self.out / f"{name}.png"
        fig.savefig(path, dpi=120, bbox_inches="tight")
        plt.close(fig)
        self.figures.append(Figure(name=name, path=path.name, caption=caption))
        return path

    @property
    def all_held(self) -> bool:
        return all(c.held for c in self.claims)

    # -- resume --------------------------------------------------------------------------------
    def cached(self, key: str, compute: Callable[..., Any]) -> Any:
        """``compute()``, or its stored JSON result from an earlier run with the same settings.

        ``compute`` is called with no arguments; ``Callable[...]`` admits the loop idiom
        ``lambda case=case: run(case)``, whose type mypy cannot infer against ``Callable[[], T]``.

        The result goes through JSON, so return what JSON keeps (dicts, lists, numbers, strings):
        a tuple comes back as a list, on the first run too.
        """
        digest = hashlib.sha256(
            json.dumps([key, self.settings], sort_keys=True, default=_json_default).encode()
        ).hexdigest()[:16]
        path = self.out / "checkpoints" / f"{key}-{digest}.json"
        if path.exists():
            return json.loads(path.read_text())
        text = json.dumps(compute(), default=_json_default)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)
        return json.loads(text)

    # -- output --------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "package": self.package,
            "title": self.title,
            "settings": self.settings,
            "created": self.created,
            "claims": [dataclasses.asdict(c) for c in self.claims],
            "tables": self.tables,
            "figures": [dataclasses.asdict(f) for f in self.figures],
        }

    def markdown(self) -> str:
        lines = [f"# {self.title}", "", f"Package `{self.package}`, run {self.created}.", ""]
        if self.settings:
            lines.append("Settings: " + ", ".join(f"`{k}={v}`" for k, v in self.settings.items()))
            lines.append("")
        lines += ["## Claims", ""]
        if self.claims:
            lines += [
                "| claim | metric | ours | baseline | expected | held |",
                "|---|---|---|---|---|---|",
            ]
            for c in self.claims:
                lines.append(
                    f"| {c.name} | {c.metric} | {_fmt(c.ours)} | {_fmt(c.baseline)} "
                    f"({c.baseline_name}) | {c.direction} | {_fmt(c.held)} |"
                )
            notes = [c for c in self.claims if c.note]
            if notes:
                lines.append("")
                lines += [f"- **{c.name}**: {c.note}" for c in notes]
        else:
            lines.append("No claims recorded.")
        for name, rows in self.tables.items():
            lines += ["", f"## {name}", ""]
            if rows:
                keys = list(rows[0])
                lines.append("| " + " | ".join(keys) + " |")
                lines.append("|" + "---|" * len(keys))
                lines += ["| " + " | ".join(_fmt(r.get(k, "")) for k in keys) + " |" for r in rows]
        if self.figures:
            lines += ["", "## Figures", ""]
            lines += [f"![{f.caption or f.name}]({f.path})" for f in self.figures]
        return "\n".join(lines) + "\n"

    def write(self) -> Path:
        """Write ``result.json`` and ``report.md`` to ``out``; return the JSON's path."""
        path = self.out / "result.json"
        path.write_text(json.dumps(self.to_dict(), indent=2, default=_json_default) + "\n")
        (self.out / "report.md").write_text(self.markdown())
        return path

    @classmethod
    def load(cls, path: str | Path) -> Report:
        """Read a report back from ``result.json`` or the folder holding it."""
        path = Path(path)
        if path.is_dir():
            path = path / "result.json"
        data = json.loads(path.read_text())
        if data.get("schema") != SCHEMA:
            raise ValueError(f"{path}: unsupported report schema {data.get('schema')!r}")
        report = cls(data["package"], data["title"], path.parent, data["settings"])
        report.created = data["created"]
        report.claims = [Claim(**c) for c in data["claims"]]
        report.tables = data["tables"]
        report.figures = [Figure(**f) for f in data["figures"]]
        return report
