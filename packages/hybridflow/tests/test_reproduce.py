from hybridflow.reproduce import main

from shared_core.report import Report


def test_reproduce_smoke_writes_a_report(tmp_path):
    assert main(["--smoke", "--out", str(tmp_path)]) == 0
    report = Report.load(tmp_path)
    assert report.package == "hybridflow"
    assert (tmp_path / "report.md").exists() and (tmp_path / "accuracy_cost.png").exists()
    names = {c.name for c in report.claims}
    assert {
        "dag_saving_equals_latency_model",
        "adaptive_dominates_fixed_threshold",
        "control_random_router_dominates_fixed",
    } <= names
