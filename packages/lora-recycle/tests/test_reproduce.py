from lora_recycle.reproduce import main

from shared_core.report import Report


def test_reproduce_smoke_writes_a_report(tmp_path):
    assert main(["--smoke", "--out", str(tmp_path)]) == 0
    report = Report.load(tmp_path)
    assert report.package == "lora-recycle"
    assert (tmp_path / "report.md").exists() and (tmp_path / "arms.png").exists()
    names = [c.name for c in report.claims]
    assert len(names) == 10 and sum(n.startswith("[tiny Llama]") for n in names) == 5
    # one target task at smoke size: every claim is n/a, never held
    assert all(c.verdict == "n/a" for c in report.claims)
    arms = {row["arm"] for row in report.tables["test accuracy per arm (mean over target tasks)"]}
    assert {
        "base",
        "target_lora",
        "ours",
        "adamerging",
        "pi_tuning",
        "lorahub",
        "avg",
        "ties",
        "tsv",
        "random_init",
        "ours_related",
        "select_cosine",
        "select_evaluation",
    } == arms
    # the pool went through the real loader: PEFT folders on disk
    assert any((tmp_path / "hub").rglob("adapter_model.safetensors"))
