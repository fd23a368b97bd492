import json
import math

import pytest

from shared_core.cli import parse_reproduce_args, reproduce_main
from shared_core.report import Claim, Report, claim_holds, subplots


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
    assert "| faster | seconds | 1 | 2 (peer) | lower | yes |" in md
    assert "lost one case" in md and "![a line](curve.png)" in md
    assert json.loads((tmp_path / "result.json").read_text())["schema"] == 1


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
