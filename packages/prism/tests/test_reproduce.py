from prism_matfn.reproduce import iterations_to, main

from shared_core.report import Report


def test_reproduce_smoke_writes_a_report(tmp_path):
    assert main(["--smoke", "--out", str(tmp_path)]) == 0
    report = Report.load(tmp_path)
    assert report.package == "prism-matfn"
    assert (tmp_path / "report.md").exists()
    assert len(report.claims) == 14
    assert all(isinstance(c.held, bool) for c in report.claims)
    names = {f.name for f in report.figures}
    assert names == {"polar_residuals", "training_curves", "training_curves_muon"}
    # the fair comparison's tables, computed from the run (issue 28)
    assert any(t.startswith("MLP on digits: lr search") for t in report.tables)
    assert "Polar: iterations to RMS residual (float32)" in report.tables
    rows = report.tables["Polar: iterations to RMS residual (float64)"]
    assert {r["method"] for r in rows} >= {"NS5", "PolarExpress", "PRISM5"}


def test_iterations_to_tolerance():
    assert iterations_to([1.0, 0.1, 1e-3, 1e-7], 1e-2) == 2
    assert iterations_to([1.0, 0.1], 1e-2) is None
