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


def _results(base, **arms):
    """Per-target results: ``base`` and each arm a list of accuracies over target tasks."""
    names = [
        "target_lora",
        "ours",
        "random_init",
        "ours_related",
        "select_cosine",
        "select_evaluation",
    ]
    return [
        {"base": {"accuracy": b}}
        | {arm: {"accuracy": arms.get(arm, arms["ours"])[i]} for arm in names}
        for i, b in enumerate(base)
    ]


def _verdicts(tmp_path, results):
    from lora_recycle.reproduce import _claims

    report = Report("lora-recycle", "t", tmp_path, {})
    _claims(report, results, [])
    return {c.name.split(" ")[1]: c.verdict for c in report.claims}


def test_closeness_claims_are_na_when_every_arm_equals_the_base(tmp_path):
    # The mutant whose coefficients stay at 0: ours, selection and random-init all return the base,
    # so "selection changes little" and "random-init ≈ recycled" would hold vacuously.
    base = [0.40, 0.45, 0.38, 0.50]
    related = [0.7, 0.75, 0.72, 0.8]
    verdicts = _verdicts(
        tmp_path, _results(base, ours=base, ours_related=related, target_lora=related)
    )
    assert verdicts["selection"] == "n/a" and verdicts["pool"] == "n/a"  # pool: random-init
    assert verdicts["merging"] == "not held"  # adaptive merging beats the base


def test_closeness_needs_the_paired_difference_plus_two_se_inside_the_tolerance(tmp_path):
    base = [0.40, 0.45, 0.38, 0.50]
    ours = [b + 0.1 for b in base]
    near = [o + d for o, d in zip(ours, [0.005, -0.004, 0.006, -0.003], strict=True)]
    off = [o + d for o, d in zip(ours, [0.03, 0.01, 0.03, 0.01], strict=True)]  # d 0.02 ± 0.006
    held = _verdicts(tmp_path, _results(base, ours=ours, random_init=near, select_cosine=near))
    assert held["selection"] == "held" and held["pool"] == "held"
    # |d| = 0.02 < 0.03 held under the old rule; |d| + 2 s.e. = 0.032 > 0.03 is not
    strict = _verdicts(tmp_path, _results(base, ours=ours, random_init=off, select_cosine=off))
    assert strict["selection"] == "not held" and strict["pool"] == "not held"
