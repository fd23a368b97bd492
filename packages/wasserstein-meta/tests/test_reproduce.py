import dataclasses
import math

import pytest
from wasserstein_meta.reproduce import main

from shared_core.report import Report


@dataclasses.dataclass
class Budget:
    steps: int = 1


def test_reproduce_smoke_writes_a_report(tmp_path):
    assert main(["--smoke", "--out", str(tmp_path)]) == 0
    report = Report.load(tmp_path)
    assert report.package == "wasserstein-meta"
    assert (tmp_path / "report.md").exists()


def test_a_tie_never_holds_and_a_clear_effect_does():
    from wasserstein_meta.reproduce import claim_verdict, paired_by_seed

    same = [[0.3, 0.5, 0.4], [0.2, 0.6, 0.4], [0.35, 0.45, 0.4]]
    diff, se, n = paired_by_seed(same, same)
    assert (diff, se, n) == (0.0, 0.0, 3)
    assert claim_verdict(diff, se, 0.4, 0.05) is False
    # A consistent but tiny gain (1 %) is below the minimum effect (10 %).
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


def test_the_standard_error_widens_the_bound_it_does_not_narrow_it():
    from wasserstein_meta.reproduce import claim_verdict

    # diff = −0.1, se = 0.1: the upper bound is +0.1, above −0.05 (a sign slip gives −0.3: held).
    assert claim_verdict(-0.1, 0.1, 1.0, 0.05, "<") is False
    assert claim_verdict(-0.3, 0.1, 1.0, 0.05, "<") is True  # bound −0.1 < −0.05
    # Non-inferiority: ours may be up to the margin worse, the s.e. counted against it.
    assert claim_verdict(0.01, 0.0, 1.0, 0.02, "≤") is True
    assert claim_verdict(0.01, 0.01, 1.0, 0.02, "≤") is False  # bound +0.03 > +0.02
    assert claim_verdict(-0.01, 0.005, 1.0, 0.02, "≤") is True
    with pytest.raises(ValueError, match="relation"):
        claim_verdict(0.0, 0.0, 1.0, 0.02, "<<")


def test_a_diverged_flight_is_counted_and_fails_the_claim():
    from wasserstein_meta.reproduce import _claim, claim_verdict, diverged_flights

    base = [[1.0, 1.0], [1.0, 1.1], [1.2, 1.0]]
    ours = [[0.2, 0.3], [math.nan, math.nan], [0.3, 0.2]]  # seed 1 diverged
    assert diverged_flights(ours, base) == 2
    assert claim_verdict(-0.8, 0.01, 1.0, 0.1, "<", diverged=2) is False

    class Recorder:
        def claim(self, name, *args, **kwargs):
            self.kwargs = kwargs

    rec = Recorder()
    _claim(rec, "x", "adaptive < PID", ours, base, "ours", "PID", Budget())
    assert rec.kwargs["held"] is False
    assert rec.kwargs["note"].startswith("2 test flight(s) diverged: not held")
    _claim(
        rec, "x", "adaptive < PID", [[0.2, 0.3], [0.25, 0.2], [0.3, 0.2]], base, "o", "b", Budget()
    )
    assert rec.kwargs["held"] is True and "diverged" not in rec.kwargs["note"]


def test_an_arm_identical_to_its_baseline_reads_na_not_held():
    from wasserstein_meta.reproduce import _claim

    class Recorder:
        def claim(self, name, *args, **kwargs):
            self.kwargs = kwargs

    base = [[0.61, 0.62], [0.60, 0.63], [0.64, 0.59]]
    rec = Recorder()
    _claim(rec, "x", "Wasserstein ≤ Euclidean", [list(f) for f in base], base, "o", "E", Budget())
    assert rec.kwargs["held"] is None
    assert rec.kwargs["note"].startswith("n/a (inert arm: identical to the baseline)")
    # A tiny but real difference is judged by the rule (a tie within the margin holds).
    ours = [[f + 1e-4 for f in fs] for fs in base]
    _claim(rec, "x", "Wasserstein ≤ Euclidean", ours, base, "o", "E", Budget())
    assert rec.kwargs["held"] is True and "inert" not in rec.kwargs["note"]


def test_help_lists_only(capsys):
    import wasserstein_meta.reproduce as rep

    with pytest.raises(SystemExit):
        rep.main(["--help"])
    assert "--only {pvtol,pfar,geometry}" in capsys.readouterr().out


def test_only_runs_the_named_sections(tmp_path, monkeypatch):
    import wasserstein_meta.reproduce as rep

    calls = []
    for name in rep.SECTIONS:
        monkeypatch.setattr(rep, f"_{name}_section", lambda *a, name=name: calls.append(name))
    assert rep.main(["--smoke", "--out", str(tmp_path), "--only", "geometry"]) == 0
    assert calls == ["geometry"]
    calls.clear()
    assert rep.main(["--smoke", "--out", str(tmp_path), "--only", "pfar", "--only", "pvtol"]) == 0
    assert calls == ["pvtol", "pfar"]
    calls.clear()
    assert rep.main(["--smoke", "--out", str(tmp_path)]) == 0
    assert calls == list(rep.SECTIONS)
    with pytest.raises(SystemExit):
        rep.main(["--smoke", "--out", str(tmp_path), "--only", "geom"])
