import math

import pytest
from adas_optim.reproduce import ONE_DIGIT, beats, bracket_lr, main
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


def _peaked(at: float):
    """A toy tuning score: unimodal in log lr, best at ``at``; records the lrs it is asked."""
    asked: list[float] = []

    def score(lr: float) -> float:
        asked.append(lr)
        return -abs(math.log2(lr / at))

    return score, asked


def test_bracket_lr_extends_an_edge_best_until_the_optimum_is_interior():
    grid = [1e-2, 2e-2, 4e-2]
    # best beyond the top: 8e-2 then 1.6e-1 are tried; 1.6e-1 is worse, so 8e-2 is interior
    score, asked = _peaked(8e-2)
    found = bracket_lr(score, grid)
    assert found["best"] == pytest.approx(8e-2) and found["interior"]
    assert asked == pytest.approx([1e-2, 2e-2, 4e-2, 8e-2, 1.6e-1])
    # best below the bottom: the grid grows downwards by the same rule
    score, asked = _peaked(5e-3)
    found = bracket_lr(score, grid)
    assert found["best"] == pytest.approx(5e-3) and found["interior"]
    assert asked[3:] == pytest.approx([5e-3, 2.5e-3])
    # an interior best adds nothing
    score, asked = _peaked(2e-2)
    found = bracket_lr(score, grid)
    assert found["best"] == pytest.approx(2e-2) and found["interior"] and len(asked) == 3


def test_bracket_lr_is_bounded_and_says_when_the_optimum_is_not_bracketed():
    # the old rule (no extension) picked the top edge and could not tell
    score, asked = _peaked(1.0)
    old = bracket_lr(score, [1e-2, 2e-2, 4e-2], max_extensions=0)
    assert old["best"] == pytest.approx(4e-2) and not old["interior"]
    score, asked = _peaked(1.0)
    found = bracket_lr(score, [1e-2, 2e-2, 4e-2])
    assert found["best"] == pytest.approx(1.6e-1) and not found["interior"]
    assert len(asked) == 5  # two extensions at most
    # a tie goes to the smaller lr: here an interior one, so the tied top edge adds nothing
    flat = bracket_lr(lambda lr: 0.5 if lr >= 2e-2 else 0.0, [1e-2, 2e-2, 4e-2])
    assert flat["best"] == pytest.approx(2e-2) and flat["interior"]
    assert list(flat["scores"]) == pytest.approx([1e-2, 2e-2, 4e-2])
    with pytest.raises(ValueError, match="empty grid"):
        bracket_lr(score, [])
    with pytest.raises(ValueError, match="max_extensions must be >= 0"):
        bracket_lr(score, [1e-2], max_extensions=-1)
