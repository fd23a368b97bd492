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
    controls = [c for c in report.claims if c.name.startswith("control:")]
    assert len(controls) == 4  # frozen SGD, λ = 1e4, the power-1.3 mutant, clipped SGD on spikes
    assert not any(c.held for c in controls)  # each is built to fail its claim's test
    assert any("ramp" in n for n in names) and any("spike" in n for n in names)
    assert any("band" in n for n in names)


@pytest.mark.slow
def test_real_data_illustration_runs():
    pytest.importorskip("sklearn")
    from adagrad_heavytail.real_data import digits_experiment

    out = digits_experiment(0, steps=5)
    assert out["tail"]["batches"] == 200
    assert {row["method"] for row in out["training"]} == {"adagrad", "sgd", "clipped_sgd"}
