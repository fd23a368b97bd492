from adascale.reproduce import main

from shared_core.report import Report


def test_reproduce_smoke_writes_a_report(tmp_path):
    assert main(["--smoke", "--out", str(tmp_path)]) == 0
    report = Report.load(tmp_path)
    assert report.package == "adascale"
    assert (tmp_path / "report.md").exists()
    assert len(report.claims) == 10
    assert all(c.na for c in report.claims)  # one seed: every comparison is n/a, never "held"
    assert {"fpr95.png", "q_prime.png"} <= {p.name for p in tmp_path.iterdir()}
