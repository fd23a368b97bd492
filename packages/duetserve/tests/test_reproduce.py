import pytest
from duetserve.reproduce import main

from shared_core.report import Report


def test_reproduce_smoke_writes_a_report(tmp_path):
    assert main(["--smoke", "--out", str(tmp_path)]) == 0
    report = Report.load(tmp_path)
    assert report.package == "duetserve"
    assert (tmp_path / "report.md").exists()


def _margin_plans(model, roof):
    from duetserve import PartitionOptimizer, Seq
    from duetserve.experiments import optimistic_model

    exact = PartitionOptimizer(model, 0.05)
    margin = PartitionOptimizer(optimistic_model(model, 1.1, roof), 0.05 / 1.1)
    batches = [
        ([Seq(2048 + i) for i in range(64)], [Seq(0, 8128)]),
        ([Seq(500)] * 200, [Seq(0, 3000)]),
        ([Seq(6000)] * 32, [Seq(100, 6000)]),
    ]
    return [(exact.plan(d, p), margin.plan(d, p)) for d, p in batches]


def test_a_uniform_planner_error_with_the_same_margin_is_the_exact_planner(qwen8b):
    # Why the margin claims use one-roof errors: FLOP/s and bandwidth both x1.1 and the SLO / 1.1
    # scale every prediction alike (tp = 1, no launch overhead), so the plans are identical.
    for exact, margin in _margin_plans(qwen8b, "both"):
        assert (exact.mode, exact.n_sm_decode, exact.lookahead, exact.prefill_token_cap) == (
            margin.mode,
            margin.n_sm_decode,
            margin.lookahead,
            margin.prefill_token_cap,
        )


@pytest.mark.parametrize("roof", ["flops", "bandwidth"])
def test_a_one_roof_planner_error_plans_differently_from_the_exact_planner(qwen8b, roof):
    pairs = _margin_plans(qwen8b, roof)
    assert any(
        (e.mode, e.n_sm_decode, e.lookahead, e.prefill_token_cap)
        != (m.mode, m.n_sm_decode, m.lookahead, m.prefill_token_cap)
        for e, m in pairs
    )


def test_a_one_roof_error_changes_the_heavy_load_run(qwen8b):
    from duetserve import PartitionOptimizer
    from duetserve.experiments import optimistic_model, run_at, unit_trace
    from duetserve.reproduce import SLO

    trace = unit_trace("mooncake", 40, 0)
    exact = run_at(trace, 6.0, "duet", qwen8b, SLO).summary()
    for roof in ("flops", "bandwidth"):
        opt = PartitionOptimizer(optimistic_model(qwen8b, 1.1, roof), SLO.tbt_s / 1.1)
        assert run_at(trace, 6.0, "duet", qwen8b, SLO, optimizer=opt).summary() != exact
