import pytest
import torch
from antic_compress import MLPPlus
from antic_compress.fields import add_lora, lora_state
from antic_compress.reproduce import (
    KeepAll,
    compare_selectors,
    lora_parameters,
    main,
    mlp_plus_parameters,
)

from shared_core.report import Report


def test_reproduce_smoke_writes_a_report(tmp_path):
    assert main(["--smoke", "--out", str(tmp_path)]) == 0
    report = Report.load(tmp_path)
    assert report.package == "antic-compress"
    assert (tmp_path / "report.md").exists()
    control = next(c for c in report.claims if c.name.startswith("negative control: keep-all"))
    assert control.verdict == "not held"


@pytest.mark.parametrize(("hidden", "layers", "fourier", "rank"), [(32, 3, 64, 8), (8, 2, 8, 2)])
def test_closed_form_parameter_counts_match_the_model(hidden, layers, fourier, rank):
    model = MLPPlus(hidden=hidden, layers=layers, fourier_dim=fourier)
    assert mlp_plus_parameters(2, 1, hidden, layers, fourier) == sum(
        p.numel() for p in model.parameters()
    )
    add_lora(model, rank)
    assert lora_parameters(hidden, layers, fourier, rank) == sum(
        v.numel() for v in lora_state(model).values()
    )


def test_uniform_baseline_has_the_same_count_and_span():
    frames = torch.randn(40, 3, 3)
    out = compare_selectors(frames, KeepAll, 0)
    assert out["kept"] == out["span"] == 40
    assert out["pats"] == out["uniform"]  # the keep-all control ties by construction
