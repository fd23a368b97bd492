import numpy as np
import pytest
from duetserve import HardwareProfile


def test_h100_preset_matches_the_spec_sheet_and_saturates_bandwidth(h100):
    assert (h100.n_sm, h100.sms_per_tpc) == (132, 2)
    assert h100.peak_flops == pytest.approx(989e12 * 0.7)
    assert h100.peak_bw == pytest.approx(3.35e12 * 0.9)
    knee = 0.35 * 132
    assert h100.bw_curve(46) == pytest.approx(h100.peak_bw * 46 / knee)
    assert h100.bw_curve(48) == h100.bw_curve(132) == pytest.approx(h100.peak_bw)
    # compute linear in the SM count
    assert h100.flops_curve(66) == pytest.approx(h100.peak_flops / 2)


def test_h200_has_more_bandwidth_same_compute(h100):
    h200 = HardwareProfile.h200_spec()
    assert h200.peak_flops == h100.peak_flops
    assert h200.peak_bw / h100.peak_bw == pytest.approx(4.8 / 3.35)
    assert h200.memory_bytes > h100.memory_bytes


def test_curves_vectorise_and_interpolate():
    hw = HardwareProfile.from_measurements(
        {"n_sm": [8, 16, 32], "flops": [1e12, 2e12, 3e12], "bandwidth": [1e11, 3e11, 3e11]},
        n_sm=32,
    )
    n = np.array([4, 8, 12, 24, 32])
    np.testing.assert_allclose(hw.flops_curve(n), [0.5e12, 1e12, 1.5e12, 2.5e12, 3e12])
    np.testing.assert_allclose(hw.bw_curve(n), [0.5e11, 1e11, 2e11, 3e11, 3e11])


def test_from_measurements_accepts_rows():
    hw = HardwareProfile.from_measurements([(2, 1.0, 2.0), (4, 2.0, 2.0)], n_sm=4)
    assert hw.flops_curve(3) == pytest.approx(1.5)


@pytest.mark.parametrize(
    ("flops", "bandwidth", "match"),
    [
        ([1.0, 0.5], [1.0, 1.0], "non-decreasing.*flops|flops must be non-decreasing"),
        ([1.0, 2.0], [2.0, 1.0], "bandwidth must be non-decreasing"),
        ([0.0, 2.0], [1.0, 1.0], "flops must be > 0"),
        ([1.0, 2.0], [1.0, float("nan")], "finite"),
    ],
)
def test_bad_curves_are_refused(flops, bandwidth, match):
    with pytest.raises(ValueError, match=match):
        HardwareProfile.from_measurements(
            {"n_sm": [2, 4], "flops": flops, "bandwidth": bandwidth}, n_sm=4
        )


def test_bad_layout_is_refused():
    with pytest.raises(ValueError, match="multiple of sms_per_tpc"):
        HardwareProfile.assumed("x", n_sm=131, sms_per_tpc=2, peak_flops=1, peak_bw=1)
    with pytest.raises(ValueError, match="bw_saturation"):
        HardwareProfile.h100_sxm_spec(bw_saturation=0.0)
    with pytest.raises(ValueError, match="lacks columns"):
        HardwareProfile.from_measurements({"n_sm": [2]}, n_sm=2)
    with pytest.raises(ValueError, match="min_partition_sm"):
        HardwareProfile.h100_sxm_spec(min_partition_sm=3)
    with pytest.raises(ValueError, match=r"\[0, 132\]"):
        HardwareProfile.h100_sxm_spec().flops_curve(133)


def test_granularity_is_the_backend_minimum_when_larger():
    assert HardwareProfile.h100_sxm_spec().granularity_sm == 2
    assert HardwareProfile.h100_sxm_spec(min_partition_sm=8).granularity_sm == 8


def test_from_measurements_refuses_a_last_point_below_n_sm():
    with pytest.raises(ValueError, match="last measured SM count must be n_sm=8"):
        HardwareProfile.from_measurements([(2, 1.0, 2.0), (4, 2.0, 2.0)], n_sm=8)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"link_bw": float("nan")}, "link_bw must be a finite number >= 0, got nan"),
        ({"link_bw": float("inf")}, "link_bw must be a finite number >= 0, got inf"),
        ({"launch_overhead_s": float("inf")}, "launch_overhead_s must be a finite"),
        ({"launch_overhead_s": float("nan")}, "launch_overhead_s must be a finite"),
        ({"memory_bytes": 0.0}, r"memory_bytes must be a finite number > 0, got 0.0"),
    ],
)
def test_non_finite_scalars_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        HardwareProfile.h100_sxm_spec(**kw)


@pytest.mark.parametrize("field", ["n_sm", "sms_per_tpc"])
def test_fractional_sm_counts_are_refused(field):
    kw = {"n_sm": 132, "sms_per_tpc": 2, field: 132.0 if field == "n_sm" else 2.0}
    with pytest.raises(ValueError, match=f"{field} must be an integer, got"):
        HardwareProfile("x", sm_counts=(132,), flops=(1.0,), bandwidth=(1.0,), **kw)
