import pytest
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


def test_gains_at_interpolates_inside_the_curve_range_only():
    from hybridflow.routing_study import gains_at

    fixed = {"a": (100.0, 0.5), "b": (200.0, 0.6), "c": (400.0, 0.9)}
    gains = gains_at([(150.0, 0.6), (250.0, 0.8)], fixed)
    assert gains == {"b": pytest.approx(0.1)}  # 0.7 at 200; a and c lie outside 150..250


def test_choose_picks_tau_and_delta0_on_validation_only():
    from hybridflow.routing_study import choose

    fixed = {"t1": (100.0, 0.4), "t2": (200.0, 0.6), "t3": (300.0, 0.8)}
    points = {
        0.1: {0.0: (320.0, 0.8), 0.2: (250.0, 0.7), 0.4: (150.0, 0.5), 0.6: (90.0, 0.4), 0.8: (80.0, 0.4)},
        0.02: {0.0: (320.0, 0.85), 0.2: (250.0, 0.78), 0.4: (150.0, 0.6), 0.6: (90.0, 0.4), 0.8: (80.0, 0.4)},
    }  # fmt: skip
    tau, d0s, gain = choose(points, fixed)
    # tau 0.02 lies above tau 0.1 everywhere; 0.8 is outside the range beyond its nearest point 0.6
    assert tau == 0.02 and d0s == [0.0, 0.2, 0.4, 0.6]
    # interpolated at 100, 200, 300: 0.4 + 0.2 / 6, 0.69, 0.78 + 0.07 * 50 / 70
    assert gain == pytest.approx((0.2 / 6 + 0.09 + 0.03) / 3, abs=1e-12)
