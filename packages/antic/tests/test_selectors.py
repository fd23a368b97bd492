"""Selector mechanics: the spec's oracles (section 6) and the state round trip."""

import pytest
import torch
from antic_compress.selectors import (
    EnstrophySelector,
    QuantileActivitySelector,
    SurgeSelector,
    UniformSelector,
    pearson,
)


def run(selector, frames):
    return [selector.decide(f) for f in frames]


def smooth_series(n=60, seed=0):
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(16, 16, generator=g)
    drift = torch.randn(16, 16, generator=g)
    return [base + 0.02 * i * drift + 0.3 * torch.sin(torch.tensor(i / 5.0)) for i in range(n)]


def test_first_frame_kept_and_ratio_is_total_over_selected():
    sel = EnstrophySelector(window_size=4)
    decisions = run(sel, smooth_series())
    assert decisions[0] is True
    assert sel.selected_num == sum(decisions)
    assert sel.compress_ratio() == pytest.approx(len(decisions) / sum(decisions))


def test_constant_field_is_selected_every_window():
    sel = EnstrophySelector(window_size=5)
    decisions = run(sel, [torch.ones(8, 8)] * 21)
    assert [i for i, d in enumerate(decisions) if d] == [0, 5, 10, 15, 20]


def test_correlation_drop_is_selected_at_once_and_anchor_is_previous_frame():
    g = torch.Generator().manual_seed(1)
    a = torch.randn(16, 16, generator=g)
    frames = [a, a.clone(), a.clone(), torch.randn(16, 16, generator=g)]
    sel = EnstrophySelector(window_size=10, corr_threshold=0.9)
    decisions = run(sel, frames)
    assert decisions == [True, False, False, True]
    # the official code compresses the previous in-bounds frame and records the current index
    assert sel.last_selected_index == 2
    assert torch.equal(sel.last_selected, frames[2])
    assert sel.selected_indices == [0, 2]


def test_enstrophy_state_round_trip_makes_identical_decisions():
    frames = smooth_series(80, seed=2)
    a = EnstrophySelector(window_size=6, corr_threshold=0.95)
    run(a, frames[:37])
    b = EnstrophySelector(window_size=6, corr_threshold=0.95)
    b.load_state_dict(a.state_dict())
    assert run(a, frames[37:]) == run(b, frames[37:])
    assert a.selected_indices == b.selected_indices and a.maxx_flux == b.maxx_flux


def test_maxx_flux_is_never_reset():
    sel = EnstrophySelector(window_size=3)
    frames = [torch.full((4, 4), 1.0 + 0.1 * i) for i in range(3)] + [torch.full((4, 4), 1.3)] * 8
    run(sel, frames)
    assert sel.maxx_flux > 0  # the early flux survives every later selection


def test_pearson_defined_for_constant_fields():
    assert pearson(torch.ones(5), torch.full((5,), 2.0)) == 1.0
    assert pearson(torch.ones(5), torch.arange(5.0)) == 0.0
    assert pearson(torch.arange(5.0), 2 * torch.arange(5.0)) == pytest.approx(1.0)


def surge_signal(values):
    return [torch.tensor(float(v)) for v in values]


def test_surge_keeps_warmup_then_one_in_window_on_flat_signal():
    sel = SurgeSelector(window_size=5, history_len=10)
    decisions = run(sel, surge_signal([1.0] * 41))
    assert all(decisions[:11])  # the first frame plus 10 frames to fill the history
    after = decisions[11:]
    assert after == ([False] * 4 + [True]) * 6


def test_surge_keeps_every_surge_frame_including_mid_skip():
    sel = SurgeSelector(window_size=5, history_len=10)
    values = [1.0] * 11 + [1.0, 3.0, 3.0, 3.0, 1.0, 1.0]
    decisions = run(sel, surge_signal(values))
    assert decisions[10] is True  # keep, start a skip of 5
    assert decisions[11] is False  # quiet, mid-skip
    assert decisions[12:15] == [True, True, True]  # the surge cancels the skip
    assert decisions[15] is True  # quiet again: keep and start a new skip


def test_surge_state_round_trip():
    values = [1.0] * 15 + [2.0, 1.0, 1.0, 5.0] + [1.0] * 10
    a = SurgeSelector(window_size=3, history_len=8)
    run(a, surge_signal(values[:14]))
    b = SurgeSelector(window_size=3, history_len=8)
    b.load_state_dict(a.state_dict())
    assert run(a, surge_signal(values[14:])) == run(b, surge_signal(values[14:]))


def test_quantile_selector_keeps_outliers_only():
    sel = QuantileActivitySelector(window_size=5, activity=lambda f: float(f))
    values = [1.0, 1.1, 0.9, 1.0, 1.05, 1.0, 10.0, 1.0]
    decisions = run(sel, surge_signal(values))
    assert decisions[0] and decisions[6]
    assert not decisions[5]


def test_uniform_matching_keeps_the_budget():
    for kept, total in [(10, 100), (37, 101), (1, 5), (5, 5)]:
        sel = UniformSelector.matching(kept, total)
        decisions = run(sel, [torch.zeros(2)] * total)
        assert sum(decisions) == kept and decisions[0]


@pytest.mark.parametrize(
    "make",
    [
        lambda: EnstrophySelector(window_size=0),
        lambda: EnstrophySelector(corr_threshold=1.5),
        lambda: EnstrophySelector(metric="l2"),
        lambda: SurgeSelector(surge_factor=1.0),
        lambda: SurgeSelector(history_len=0),
        lambda: QuantileActivitySelector(low_quantile=0.5, high_quantile=0.4),
        lambda: QuantileActivitySelector(high_quantile=1.0),
        lambda: UniformSelector(stride=0.5),
    ],
)
def test_bad_selector_parameters(make):
    with pytest.raises(ValueError):
        make()


def test_non_finite_frame_is_rejected():
    sel = EnstrophySelector()
    sel.decide(torch.ones(3))
    with pytest.raises(ValueError, match="NaN/Inf"):
        sel.decide(torch.tensor([1.0, float("nan"), 1.0]))
