import pytest
from adagrad_heavytail.reproduce import main

from shared_core.report import Report


def test_reproduce_smoke_writes_a_report(tmp_path):
    assert main(["--smoke", "--out", str(tmp_path)]) == 0
    report = Report.load(tmp_path)
    assert report.package == "adagrad-heavytail"
    assert (tmp_path / "report.md").exists()
    assert (tmp_path / "rates.png").exists() and (tmp_path / "lower_bound.png").exists()
    names = [c.name for c in report.claims]
    assert any(n.startswith("control:") for n in names)
    assert any("ramp" in n for n in names)


@pytest.mark.slow
def test_real_data_illustration_runs():
    pytest.importorskip("sklearn")
    from adagrad_heavytail.real_data import digits_experiment

    out = digits_experiment(0, steps=5)
    assert out["tail"]["batches"] == 200
    assert {row["method"] for row in out["training"]} == {"adagrad", "sgd", "clipped_sgd"}
