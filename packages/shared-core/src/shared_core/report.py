"""The reproduction report every ``python -m <package>.reproduce`` writes.

A report holds *claims* (the paper says ours beats a baseline on a metric: did it, here?), tables and
PNG figures, and writes ``result.json`` (machine-readable, the schema below) and ``report.md`` to one
folder. ``held`` is always computed from the measured figures, never written in.

``result.json``::

    {"schema": 2, "package": str, "version": str, "title": str, "settings": {...},
     "created": iso-8601,
     "claims": [{"name", "metric", "ours", "baseline", "baseline_name", "direction",
                 "tolerance", "held", "settings", "note", "samples", "na"}],
     "reused": [{"key", "created", "version"}],
     "tables": {name: [row, ...]}, "figures": [{"name", "path", "caption"}]}

A claim is *n/a* (``na`` names why, ``held`` is false) when the comparison is degenerate: both sides
infinite, a NaN on either side, or fewer than :data:`MIN_SAMPLES` samples behind it. Such a claim is
reported "n/a", never "held".

Checkpoints (:meth:`Report.cached`) are keyed on the package's version, a hash of the settings, a
hash of the package's source files and shared-core's version and source, so a result computed by other code or settings is never reused;
the report lists every reused result with the date it was computed.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

SCHEMA = 2
MIN_SAMPLES = 3
Direction = Literal["lower", "higher", "close"]
DIRECTIONS: tuple[str, ...] = ("lower", "higher", "close")


def degenerate(ours: float, baseline: float, samples: int | None = None) -> str:
    """Why comparing ``ours`` with ``baseline`` says nothing, or ``""`` when it is a real comparison."""
    if math.isnan(ours) or math.isnan(baseline):
        return f"a NaN side (ours {ours}, baseline {baseline})"
    if math.isinf(ours) and math.isinf(baseline):
        return f"both sides infinite (ours {ours}, baseline {baseline})"
    if samples is not None and samples < MIN_SAMPLES:
        return f"{samples} samples behind it (fewer than {MIN_SAMPLES})"
    return ""


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
    ``samples`` is how many samples (runs, seeds, valid draws) the smaller side rests on, where that
    can be small; a degenerate comparison (:func:`degenerate`) sets ``na`` and never holds.
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
    samples: int | None = None
    na: str = ""

    def __post_init__(self) -> None:
        self.ours = float(self.ours)
        self.baseline = float(self.baseline)
        self.na = self.na or degenerate(self.ours, self.baseline, self.samples)
        if self.na:
            self.held = False
        elif self.held is None:
            self.held = claim_holds(self.ours, self.baseline, self.direction, self.tolerance)
        self.held = bool(self.held)

    @property
    def verdict(self) -> str:
        """``"held"``, ``"not held"`` or ``"n/a"``."""
        return "n/a" if self.na else ("held" if self.held else "not held")


@dataclasses.dataclass
class Figure:
    name: str
    path: str
    caption: str = ""


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _text_digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _json_default(value: Any) -> Any:
    # numpy and torch scalars and arrays, Paths: everything else is a bug in the caller.
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} to result.json: {value!r}")


def package_version(package: str) -> str:
    """The installed version of distribution ``package``, or ``"0+unknown"`` outside an install."""
    import importlib.metadata

    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def source_hash(module_name: str) -> str:
    """A hash of every ``.py`` file of the top-level package that ``module_name`` belongs to.

    ``""`` when no such package can be found.
    """
    import importlib.util

    top = module_name.partition(".")[0]
    try:
        spec = importlib.util.find_spec(top)
    except ValueError:  # __main__ of a script run directly
        spec = None
    if spec is None:
        return ""  # no installed source to key on (a report of a script, not of a package)
    digest = hashlib.sha256()
    roots = [Path(r) for r in spec.submodule_search_locations or []]
    if not roots and spec.origin:  # a single-file module
        roots = [Path(spec.origin)]
    for root in roots:
        files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
        for path in files:
            digest.update(str(path.relative_to(root) if root.is_dir() else path.name).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def _core_source() -> str:
    return source_hash("shared_core")


def object_source_hash(objects: Sequence[Any]) -> str:
    """A hash of the source of each module, class or function in ``objects``."""
    import inspect

    if not objects:
        raise ValueError("code= names no module, class or function to key the checkpoint on")
    digest = hashlib.sha256()
    for obj in objects:
        try:
            digest.update(inspect.getsource(obj).encode())
        except (TypeError, OSError) as error:
            raise ValueError(f"code=: cannot read the source of {obj!r} ({error})") from error
    return digest.hexdigest()[:16]


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
    step name, the package version, the report settings and the package's source, so a rerun of the
    same code with the same ``--out`` and settings skips it, and the report says it did.
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
        self.reused: list[dict[str, str]] = []
        self.version = package_version(package)
        self.created = _now()
        self._code: str | None = None
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
        samples: int | None = None,
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
            samples=samples,
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

    def counts(self) -> dict[str, int]:
        """``{"held", "not held", "n/a"}`` counts over the claims."""
        verdicts = [c.verdict for c in self.claims]
        return {v: verdicts.count(v) for v in ("held", "not held", "n/a")}

    def summary(self) -> str:
        """``"7/10 claims held (1 n/a)"``: the one-line count a run prints."""
        counts = self.counts()
        line = f"{counts['held']}/{len(self.claims)} claims held"
        return line + (f" ({counts['n/a']} n/a)" if counts["n/a"] else "")

    # -- resume --------------------------------------------------------------------------------
    def cached(
        self, key: str, compute: Callable[..., Any], *, code: Sequence[Any] | None = None
    ) -> Any:
        """``compute()``, or its stored JSON result from an earlier run with the same settings.

        ``compute`` is called with no arguments; ``Callable[...]`` admits the loop idiom
        ``lambda case=case: run(case)``, whose type mypy cannot infer against ``Callable[[], T]``.

        The result goes through JSON, so return what JSON keeps (dicts, lists, numbers, strings):
        a tuple comes back as a list, on the first run too.

        The key holds the package version, the settings and a hash of the source of the report's
        package, so any edit of the package recomputes the step. ``code`` narrows that: the modules,
        classes or functions whose source produced the result (say, the experiment module but not
        the claims in ``reproduce.py``); you then vouch that nothing else changes the result. A
        checkpoint whose stored result no longer matches its digest (edited by hand) is recomputed.
        Each reuse is recorded in :attr:`reused` with the date it was computed.
        """
        if code is not None:
            source = object_source_hash(code)
        else:
            # The report's package, not compute.__module__: under `python -m` that reads "__main__".
            if self._code is None:
                self._code = source_hash(self.package.replace("-", "_"))
            source = self._code
        # shared-core's own version and source too: the tiny models and loaders live here.
        identity = {
            "version": self.version,
            "code": source,
            "core": [package_version("shared-core"), _core_source()],
            "settings": self.settings,
        }
        digest = hashlib.sha256(
            json.dumps([key, identity], sort_keys=True, default=_json_default).encode()
        ).hexdigest()[:16]
        path = self.out / "checkpoints" / f"{key}-{digest}.json"
        if path.exists():
            stored = json.loads(path.read_text())
            text = json.dumps(stored.get("result"), default=_json_default)
            if stored.get("digest") == _text_digest(text):
                self.reused.append(
                    {"key": key, "created": stored["created"], "version": stored["version"]}
                )
                return json.loads(text)
        text = json.dumps(compute(), default=_json_default)
        record = {
            "key": key,
            "created": _now(),
            "version": self.version,
            "digest": _text_digest(text),
            "result": json.loads(text),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, default=_json_default))
        tmp.replace(path)
        return record["result"]

    # -- output --------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "package": self.package,
            "version": self.version,
            "title": self.title,
            "settings": self.settings,
            "created": self.created,
            "claims": [dataclasses.asdict(c) for c in self.claims],
            "reused": self.reused,
            "tables": self.tables,
            "figures": [dataclasses.asdict(f) for f in self.figures],
        }

    def markdown(self) -> str:
        lines = [
            f"# {self.title}",
            "",
            f"Package `{self.package}` {self.version}, run {self.created}: {self.summary()}.",
            "",
        ]
        if self.settings:
            lines.append("Settings: " + ", ".join(f"`{k}={v}`" for k, v in self.settings.items()))
            lines.append("")
        if self.reused:
            dates = sorted({r["created"] for r in self.reused})
            span = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
            lines.append(
                f"Reused {len(self.reused)} cached results computed {span} by this version and "
                f"code ({', '.join(r['key'] for r in self.reused)}); `--fresh` recomputes them."
            )
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
                    f"({c.baseline_name}) | {c.direction} | {c.verdict} |"
                )
            notes = [c for c in self.claims if c.note or c.na]
            if notes:
                lines.append("")
                lines += [
                    f"- **{c.name}**: "
                    + "; ".join(filter(None, [f"n/a: {c.na}" if c.na else "", c.note]))
                    for c in notes
                ]
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
        if data.get("schema") not in (1, SCHEMA):
            raise ValueError(
                f"{path}: unsupported report schema {data.get('schema')!r}, expected 1 or {SCHEMA}"
            )
        report = cls(data["package"], data["title"], path.parent, data["settings"])
        report.created = data["created"]
        report.version = data.get("version", report.version)
        report.reused = data.get("reused", [])
        report.claims = [Claim(**c) for c in data["claims"]]
        report.tables = data["tables"]
        report.figures = [Figure(**f) for f in data["figures"]]
        return report
