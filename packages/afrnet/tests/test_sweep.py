"""The sweep's judging (benchmarks/sweep.py) on its committed results and on hand-made rows."""

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("sklearn")
pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("afrnet_sweep", ROOT / "benchmarks" / "sweep.py")
sweep = importlib.util.module_from_spec(_spec)
sys.modules["afrnet_sweep"] = sweep  # dataclasses look their module up
_spec.loader.exec_module(sweep)
RESULTS = ROOT / "docs" / "sweep" / "results.jsonl"


def _point(aucs, gcn, fc=0.45, sc=0.45, test_classes=(40, 40)):
    point = {"fixture": "coupling", "delta": 0.3, "size": 200, "density": 0.1}
    rows = [{**point, "model": "fixed", "seed": -1, "oracle": 0.9, "sc_logreg": sc,
             "fc_logreg": fc, "chance": 0.25, "test_classes": list(test_classes)}]  # fmt: skip
    for seed, (a, g) in enumerate(zip(aucs, gcn, strict=True)):
        rows.append({**point, "model": "afrnet", "seed": seed, "auc": a, "recovery": 0.2})
        rows.append({**point, "model": "gcn", "seed": seed, "auc": g})
    return rows


def test_report_judges_every_seed_in_the_file(tmp_path):
    # seeds 3-4 turn the comparison: the old report dropped seed >= 3 and read "held"
    rows = _point([0.9, 0.9, 0.9, 0.1, 0.1], [0.6, 0.6, 0.6, 0.6, 0.6])
    judged = sweep.report(rows, tmp_path)
    (j,) = judged.values()
    assert j["seeds"] == 5
    assert j["afrnet"] == pytest.approx(0.58)
    assert "| 5 |" in (tmp_path / "table.md").read_text()


def test_a_score_that_cannot_know_the_label_does_not_learn():
    # three seeds at 0.56 ± 0: above 0.5 by 2 seed s.e., inside the test set's chance noise
    j = sweep.judge(_point([0.56, 0.56, 0.56], [0.3, 0.3, 0.3], fc=0.3, sc=0.3))
    assert not j["learns"]
    assert not j["beats_baselines"]  # a tie above baselines below chance is not "held"
    assert sweep.judge(_point([0.9, 0.9, 0.9], [0.3, 0.3, 0.3]))["learns"]


def test_fc_only_mutant_passes_no_point_of_the_committed_sweep():
    # the FC-only score is at chance by construction (the label is in the SC-FC coupling)
    rows = sweep.load(RESULTS)
    groups = {}
    for r in rows:
        groups.setdefault((r["fixture"], r["delta"], r["size"], r["density"]), []).append(r)
    coupling = [g for k, g in groups.items() if k[0] == "coupling"]
    assert len(coupling) == 24
    passed = 0
    for g in coupling:
        fc = next(r for r in g if r["model"] == "fixed")["fc_logreg"]
        mutant = [{**r, "auc": fc} if r["model"] == "afrnet" else r for r in g]
        passed += sweep.judge(mutant)["learns"]
    assert passed == 0
