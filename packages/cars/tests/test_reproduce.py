from cars_sampling.reproduce import main

from shared_core.report import Report


def test_reproduce_smoke_writes_a_report(tmp_path):
    assert main(["--smoke", "--out", str(tmp_path)]) == 0
    report = Report.load(tmp_path)
    assert report.package == "cars-sampling"
    assert (tmp_path / "report.md").exists()
    names = [c.name for c in report.claims]
    assert any("GCD is biased" in n for n in names)
    assert any("(a) paper's regime" in n for n in names)
    assert any("cone-masked mutant" in n for n in names)
    # wall time is descriptive only: one sequential run per style cannot carry a claim
    assert not any("wall" in n or "seconds" in n for n in names)
    assert len(report.tables) == 3 and (tmp_path / "acceptance.png").exists()
