import json
import math

import pytest

from shared_core.cli import missing_requirements, parse_reproduce_args, reproduce_main
from shared_core.report import Claim, Report, claim_holds, degenerate, subplots


@pytest.mark.parametrize(
    ("ours", "baseline", "direction", "tol", "held"),
    [
        (1.0, 2.0, "lower", 0.0, True),
        (2.0, 1.0, "lower", 0.0, False),
        (2.0, 1.9, "lower", 0.2, True),
        (3.0, 2.0, "higher", 0.0, True),
        (1.0, 2.0, "higher", 0.5, False),
        (1.0, 1.05, "close", 0.1, True),
        (1.0, 1.5, "close", 0.1, False),
        (math.nan, 1.0, "lower", 0.0, False),
    ],
)
def test_claim_holds(ours, baseline, direction, tol, held):
    assert claim_holds(ours, baseline, direction, tol) is held


def test_claim_rejects_unknown_direction():
    with pytest.raises(ValueError, match="direction must be one of"):
        Claim("c", "m", 1.0, 2.0, direction="smaller")  # type: ignore[arg-type]


def test_report_round_trips_through_json_and_writes_markdown_and_png(tmp_path):
    report = Report("demo-pkg", "Demo", tmp_path, {"size": "smoke", "seed": 3})
    report.claim("faster", "seconds", 1.0, 2.0, direction="lower", baseline_name="peer")
    report.claim("sweep", "cases won", 3, 4, direction="higher", held=False, note="lost one case")
    report.table("errors", [{"method": "ours", "error": 0.125}, {"method": "peer", "error": 0.5}])
    fig, ax = subplots()
    ax.plot([0, 1], [1, 0])
    report.figure("curve", fig, caption="a line")
    report.write()

    loaded = Report.load(tmp_path)
    assert loaded.to_dict() == report.to_dict()
    assert [c.held for c in loaded.claims] == [True, False]
    assert not loaded.all_held
    assert (tmp_path / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (tmp_path / "report.md").read_text()
    assert "| faster | seconds | 1 | 2 (peer) | lower | held |" in md
    assert "| sweep | cases won | 3 | 4 (peer) | higher | not held |" not in md  # baseline_name
    assert "| sweep | cases won | 3 | 4 (baseline) | higher | not held |" in md
    assert "1/2 claims held." in md
    assert "lost one case" in md and "![a line](curve.png)" in md
    assert json.loads((tmp_path / "result.json").read_text())["schema"] == 2


def test_cached_steps_resume_and_depend_on_settings(tmp_path):
    calls = []

    def step():
        calls.append(1)
        return {"value": len(calls)}

    first = Report("p", "t", tmp_path, {"seed": 0})
    assert first.cached("step", step) == {"value": 1}
    assert Report("p", "t", tmp_path, {"seed": 0}).cached("step", step) == {"value": 1}
    assert Report("p", "t", tmp_path, {"seed": 1}).cached("step", step) == {"value": 2}
    assert len(calls) == 2


def test_cli_sizes_and_defaults(tmp_path):
    args = parse_reproduce_args(["--out", str(tmp_path)])
    assert args.size == "quick" and args.seed == 0 and args.pick(1, 2, 3) == 2
    assert parse_reproduce_args(["--full"]).full
    assert parse_reproduce_args(["--smoke", "--seed", "4"]).pick(1, 2, 3) == 1
    with pytest.raises(SystemExit):
        parse_reproduce_args(["--quick", "--full"])
    with pytest.raises(SystemExit):
        parse_reproduce_args(["--seed", "-1"])


def test_reproduce_main_writes_the_report(tmp_path):
    def run(args):
        report = Report("p", "t", args.out, {"size": args.size})
        report.claim("c", "m", 1, 1, direction="close")
        return report

    assert reproduce_main(run, ["--smoke", "--out", str(tmp_path)]) == 0
    assert Report.load(tmp_path).settings == {"size": "smoke"}


@pytest.mark.parametrize(
    ("ours", "baseline", "samples", "why"),
    [
        (math.inf, math.inf, None, "both sides infinite"),
        (-math.inf, -math.inf, None, "both sides infinite"),
        (math.nan, 1.0, None, "NaN"),
        (1.0, 2.0, 2, "2 samples"),
        (1.0, 2.0, 0, "0 samples"),
    ],
)
def test_degenerate_comparisons_are_na_never_held(ours, baseline, samples, why):
    claim = Claim("c", "m", ours, baseline, direction="lower", samples=samples, held=True)
    assert why in claim.na and claim.held is False and claim.verdict == "n/a"


def test_real_comparisons_are_not_degenerate():
    assert degenerate(1.0, 2.0, 3) == "" and degenerate(math.inf, 2.0) == ""
    claim = Claim("c", "m", math.inf, 2.0, direction="lower")  # ours diverged: not held, not n/a
    assert claim.verdict == "not held"


def test_report_counts_na_apart(tmp_path):
    report = Report("p", "t", tmp_path)
    report.claim("a", "m", 1, 2, direction="lower")
    report.claim("b", "m", math.inf, math.inf, direction="lower")
    report.claim("c", "m", 3, 2, direction="lower")
    assert report.counts() == {"held": 1, "not held": 1, "n/a": 1}
    assert report.summary() == "1/3 claims held (1 n/a)"
    report.write()
    md = (tmp_path / "report.md").read_text()
    assert "| b | m | inf | inf (baseline) | lower | n/a |" in md and "n/a: both sides" in md
    assert Report.load(tmp_path).claims[1].verdict == "n/a"


def test_cached_results_are_announced_with_their_date(tmp_path):
    first = Report("shared-core", "t", tmp_path, {"seed": 0})
    first.cached("step", lambda: [1, 2])
    assert first.reused == []
    again = Report("shared-core", "t", tmp_path, {"seed": 0})
    assert again.cached("step", lambda: [3]) == [1, 2]
    assert [r["key"] for r in again.reused] == ["step"]
    again.write()
    md = (tmp_path / "report.md").read_text()
    assert "Reused 1 cached results computed " + again.reused[0]["created"] in md
    assert json.loads((tmp_path / "result.json").read_text())["reused"][0]["key"] == "step"


def test_a_hand_edited_checkpoint_is_recomputed(tmp_path):
    Report("shared-core", "t", tmp_path).cached("step", lambda: {"v": 1})
    (path,) = (tmp_path / "checkpoints").glob("step-*.json")
    record = json.loads(path.read_text())
    record["result"] = {"v": 99}
    path.write_text(json.dumps(record))
    again = Report("shared-core", "t", tmp_path)
    assert again.cached("step", lambda: {"v": 2}) == {"v": 2} and again.reused == []


def test_checkpoints_are_keyed_on_version_and_code(tmp_path, monkeypatch):
    import shared_core.report as report_module

    Report("shared-core", "t", tmp_path).cached("step", lambda: 1)
    newer = Report("shared-core", "t", tmp_path)
    newer.version = "9.9.9"
    assert newer.cached("step", lambda: 2) == 2
    monkeypatch.setattr(report_module, "source_hash", lambda name: "other-code")
    assert Report("shared-core", "t", tmp_path).cached("step", lambda: 3) == 3


def test_fresh_recomputes_cached_steps(tmp_path):
    calls = []

    def run(args):
        report = Report("shared-core", "t", args.out)
        report.cached("step", lambda: calls.append(1) or len(calls))
        return report

    argv = ["--smoke", "--out", str(tmp_path)]
    reproduce_main(run, argv, dist="shared-core")
    reproduce_main(run, argv, dist="shared-core")
    reproduce_main(run, [*argv, "--fresh"], dist="shared-core")
    assert calls == [1, 1]


def test_help_names_the_module_and_the_out_default(capsys):
    def run(args):  # pragma: no cover - --help exits first
        raise AssertionError

    with pytest.raises(SystemExit):
        reproduce_main(run, ["--help"], dist="shared-core")
    text = capsys.readouterr().out
    assert text.startswith(f"usage: python -m {__name__}")
    assert "(default: reproduce-out)" in text and "--fresh" in text


def test_a_missing_reproduce_extra_is_named_in_one_line(capsys, monkeypatch):
    import shared_core.cli as cli

    monkeypatch.setattr(cli, "missing_requirements", lambda dist, extra: ["matplotlib"])

    def run(args):  # pragma: no cover - never reached
        raise AssertionError

    assert reproduce_main(run, ["--smoke"], dist="demo-pkg") == 2
    assert capsys.readouterr().err == "pip install 'demo-pkg[reproduce]'\n"


def test_missing_requirements_follows_nested_extras():
    # shared-core[test] names shared-core[torch,reproduce,...]: all installed in the test venv.
    assert missing_requirements("shared-core", "test") == []
    assert missing_requirements("shared-core", "no-such-extra") == []
    with pytest.raises(Exception, match="no-such-dist"):
        missing_requirements("no-such-dist", "reproduce")


def _experiment(x):
    return x + 1


def test_code_narrows_the_checkpoint_key_to_the_named_source(tmp_path, monkeypatch):
    import shared_core.report as report_module

    Report("shared-core", "t", tmp_path).cached("step", lambda: 1, code=[_experiment])
    # The rest of the package changes: a step keyed on _experiment alone is reused.
    monkeypatch.setattr(report_module, "source_hash", lambda name: "other-code")
    again = Report("shared-core", "t", tmp_path)
    assert again.cached("step", lambda: 2, code=[_experiment]) == 1 and len(again.reused) == 1
    # _experiment's own source changes: recomputed.
    monkeypatch.setattr("inspect.getsource", lambda obj: "def _experiment(x):\n    return x + 2\n")
    assert Report("shared-core", "t", tmp_path).cached("step", lambda: 3, code=[_experiment]) == 3
    with pytest.raises(ValueError, match="names no module"):
        Report("shared-core", "t", tmp_path).cached("other", lambda: 4, code=[])


def test_checkpoints_are_keyed_on_shared_core_too(tmp_path, monkeypatch):
    import shared_core.report as report_module

    Report("shared-core", "t", tmp_path).cached("step", lambda: 1)
    monkeypatch.setattr(report_module, "_core_source", lambda: "edited shared-core")
    again = Report("shared-core", "t", tmp_path)
    assert again.cached("step", lambda: 2) == 2 and again.reused == []
