import math

from adalina.reproduce import main

from shared_core.report import Report


def test_reproduce_smoke_writes_a_report(tmp_path):
    assert main(["--smoke", "--out", str(tmp_path)]) == 0
    report = Report.load(tmp_path)
    assert report.package == "adalina"
    assert (tmp_path / "report.md").exists()
    assert len(report.claims) == 12
    assert all(math.isfinite(c.ours) and math.isfinite(c.baseline) for c in report.claims)
    rows = report.tables["Relative error at budget 50n (mean over 2 seeds)"]
    assert {r["semivalue"] for r in rows} == {"shapley", "banzhaf(0.5)", "beta(4,1)"}
    # every estimator's error is a relative error of a real estimate, not a placeholder
    assert all(0 < r["adalina"] < 1 for r in rows)
    assert {f.name for f in report.figures} == {"error_vs_budget", "gamma_sweep", "data_valuation"}
    # a rerun with the same settings resumes from the checkpoints
    assert main(["--smoke", "--out", str(tmp_path)]) == 0
