import pytest
from adas_optim.reproduce import ONE_DIGIT, beats, main
from adas_optim.training import RunConfig, digits_data, train

from shared_core.report import Report


def test_reproduce_smoke_writes_a_report(tmp_path):
    assert main(["--smoke", "--out", str(tmp_path)]) == 0
    report = Report.load(tmp_path)
    assert report.package == "adas-optim"
    assert (tmp_path / "report.md").exists()


def test_beats_needs_a_margin_beyond_two_paired_standard_errors():
    base = [0.90, 0.91, 0.92, 0.93, 0.94]
    # identical runs and ties never pass (the old ">=" claims held on them)
    assert not beats(base, base, ONE_DIGIT)["held"]
    assert not beats([b + 0.5 * ONE_DIGIT for b in base], base, ONE_DIGIT)["held"]
    # a consistent gain well beyond its noise passes
    gains = [0.010, 0.012, 0.011, 0.013, 0.009]
    assert beats([b + g for b, g in zip(base, gains, strict=True)], base, ONE_DIGIT)["held"]
    # a positive mean inside 2 s.e. does not
    noisy = [0.03, -0.02, 0.025, -0.02, 0.0]
    st = beats([b + g for b, g in zip(base, noisy, strict=True)], base, ONE_DIGIT)
    assert st["mean_diff"] > 0 and not st["held"]
    with pytest.raises(ValueError, match="floor must be > 0"):
        beats(base, base, 0.0)


def test_adas_reduced_to_adamw_fails_the_accuracy_claim():
    # The negative control of reproduce, at smoke size: AdaS with γ = 1e30 is AdamW, so the test of
    # "AdaS beats AdamW" must read not held on it.
    data = digits_data()
    small = dict(epochs=1, dim=16, n_train=128)
    adamw = [train(RunConfig("adamw", 5e-3, s, **small), data)["accuracy"] for s in range(3)]
    null = [
        train(RunConfig("adas", 5e-3, s, gamma=1e30, **small), data)["accuracy"] for s in range(3)
    ]
    assert null == pytest.approx(adamw, abs=ONE_DIGIT)
    assert not beats(null, adamw, ONE_DIGIT)["held"]
