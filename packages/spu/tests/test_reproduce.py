import pytest
from spu_dna.experiments import MODELS, PARAM_BAND, build, count_parameters
from spu_dna.reproduce import main

from shared_core.report import Report


@pytest.mark.parametrize("name", MODELS)
def test_every_arm_is_in_the_parameter_band_at_any_length(name):
    low, high = PARAM_BAND
    counts = {count_parameters(build(name, length)) for length in (128, 8192)}
    assert len(counts) == 1, f"{name}: parameter count depends on the length: {counts}"
    assert low <= counts.pop() <= high


def test_reproduce_smoke_computes_every_claim_over_every_arm(tmp_path):
    assert main(["--smoke", "--out", str(tmp_path)]) == 0
    report = Report.load(tmp_path)
    assert report.package == "spu-dna"
    assert (tmp_path / "report.md").exists()
    names = [c.name for c in report.claims]
    assert len(names) == 10
    for fragment in ("SPU >= CNN", "SPU >= Transformer", "SPU >= Hyena", "SPU >= Mamba",
                     "removing DPL-freq", "removing LPL", "CNN fails", "quasi-linearly",
                     "attention's time"):  # fmt: skip
        assert any(fragment in n for n in names), fragment
    for claim in report.claims:
        assert isinstance(claim.held, bool), claim.name
        assert claim.ours == claim.ours and claim.baseline == claim.baseline, claim.name  # not NaN
    (table,) = [rows for name, rows in report.tables.items() if name.startswith("test accuracy")]
    assert [row["model"] for row in table] == list(MODELS)
    grid = report.settings["lr_grid"]
    for row in table:
        assert PARAM_BAND[0] <= row["params"] <= PARAM_BAND[1], row
        # every arm tuned on the same grid, per task
        assert all(float(lr) in grid for lr in row["lr (per task)"].split("/")), row
        # the validation accuracy behind each choice, one per lr of the grid
        assert len(row["motif val acc per lr"].split(" / ")) == len(grid), row
    timing = report.tables["forward + backward time"]
    assert [row["model"] for row in timing] == ["SPU", "Transformer"]
    assert all(row["time(2L)/time(L)"] > 0 and row["pairs"] == 2 for row in timing)
