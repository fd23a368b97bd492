from wasserstein_meta.reproduce import main

from shared_core.report import Report


def test_reproduce_smoke_writes_a_report(tmp_path):
    assert main(["--smoke", "--out", str(tmp_path)]) == 0
    report = Report.load(tmp_path)
    assert report.package == "wasserstein-meta"
    assert (tmp_path / "report.md").exists()


def test_a_tie_never_holds_and_a_clear_effect_does():
    from wasserstein_meta.reproduce import claim_verdict, paired_by_seed

    same = [[0.3, 0.5, 0.4], [0.2, 0.6, 0.4], [0.35, 0.45, 0.4]]
    diff, se, n = paired_by_seed(same, same)  # M1: meta-training that does nothing
    assert (diff, se, n) == (0.0, 0.0, 3)
    assert claim_verdict(diff, se, 0.4, 0.05) is False
    # M2-like: a consistent but tiny gain (1 %) is below the minimum effect (10 %).
    tiny = [[x * 0.99 for x in f] for f in same]
    diff, se, _ = paired_by_seed(tiny, same)
    assert diff < 0 and diff + 2 * se < 0
    assert claim_verdict(diff, se, 0.4, 0.10) is False
    better = [[x * 0.5 for x in f] for f in same]
    assert claim_verdict(*paired_by_seed(better, same)[:2], 0.4, 0.10) is True
    assert claim_verdict(float("nan"), 0.0, 0.4, 0.1) is None


def test_seed_to_seed_spread_is_in_the_standard_error():
    from wasserstein_meta.reproduce import paired_by_seed

    base = [[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]]
    # Within a seed every flight gains the same; across seeds the gain varies a lot.
    ours = [[0.5, 0.5], [1.0, 1.0], [1.5, 1.5]]
    diff, se, n = paired_by_seed(ours, base)
    assert n == 3 and abs(diff) < 1e-12
    assert abs(se - 0.5 / 3**0.5) < 1e-12  # std 0.5 over 3 seeds; the flights alone give 0
