import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "paper_protocol.py"


def _load(monkeypatch):
    spec = importlib.util.spec_from_file_location("paper_protocol", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "paper_protocol", module)  # dataclasses look it up
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def default_device_meta():
    torch.set_default_device("meta")
    try:
        yield
    finally:
        torch.set_default_device(None)


def test_paper_protocol_runs_every_method_at_toy_sizes(tmp_path, monkeypatch, default_device_meta):
    """Every method's job at toy sizes, with torch's default device moved to ``meta`` and the jobs
    on ``--device cpu``: a tensor made on the default device instead of the job's would raise
    (on a GPU it would be a CPU tensor beside CUDA ones). The flights are bounded: at these sizes
    (2 s, references ~5 m/s, one meta-step) PID's RMS error was 1.81 m and the others
    0.64-1.94 m; a diverging or mis-wired flight gives tens of metres."""
    protocol = _load(monkeypatch)
    out = tmp_path / "protocol.json"
    figures = protocol.main(["--tiny", "--device", "cpu", "--out", str(out)])
    results = figures["jobs"]
    assert [r["method"] for r in results] == list(protocol.METHODS)
    assert {"MRR (grid gains)", "Euclidean (grid gains)"} <= set(protocol.METHODS)
    pid = results[0]["rms_error"]
    assert 0 < pid < 3.0
    for r in results:
        assert 0 < r["rms_error"] <= 1.25 * pid, r
    assert all(set(r["wall_s"]) == {"data", "fit_ensemble", "meta_train", "test"} for r in results)
    assert json.loads(out.read_text())["jobs"] == results
    assert figures["mean_rms_error"]["2"]["PID"] == results[0]["rms_error"]
    with pytest.raises(ValueError, match="method must be one of"):
        protocol.job(0, 2, "Richards", protocol.TINY)


def test_gpu_run_has_a_cpu_dry_run_and_a_deadline(tmp_path, monkeypatch):
    """The GPU command's path (device, subsets, deadline) on the CPU: past the deadline no job
    starts, and the JSON lists them as skipped."""
    protocol = _load(monkeypatch)
    args = ["--tiny", "--device", "cpu", "--seeds", "0", "--Ms", "2", "--out", str(tmp_path / "g")]
    reduced = ["--steps", "2", "--val-every", "2"]  # the GPU command's reduced scope
    figures = protocol.main([*args, *reduced, "--methods", "Euclidean", "--deadline-s", "600"])
    assert [r["method"] for r in figures["jobs"]] == ["Euclidean"] and figures["skipped"] == []
    assert figures["sizes"]["steps"] == 2 and figures["sizes"]["val_every"] == 2
    assert figures["device"] == "cpu" and figures["card"] and figures["date"]
    late = protocol.main([*args, "--methods", "Euclidean", "PID", "--deadline-s", "-1"])
    assert late["jobs"] == [] and [r["method"] for r in late["skipped"]] == ["Euclidean", "PID"]


def test_cuda_without_a_gpu_is_refused(monkeypatch, capsys):
    protocol = _load(monkeypatch)
    monkeypatch.setattr(protocol.torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit):
        protocol.main(["--tiny", "--device", "cuda"])
    assert "sees no CUDA device" in capsys.readouterr().err


@pytest.mark.slow
def test_compiled_dry_run_equals_eager(tmp_path, monkeypatch):
    """``--compile`` (the GPU command's step) gives the eager run's error on the CPU."""
    protocol = _load(monkeypatch)
    args = ["--tiny", "--seeds", "0", "--Ms", "2", "--methods", "Wasserstein-primal"]
    eager = protocol.main([*args, "--out", str(tmp_path / "e")])["jobs"][0]["rms_error"]
    compiled = protocol.main([*args, "--compile", "--out", str(tmp_path / "c")])["jobs"][0]
    assert abs(compiled["rms_error"] - eager) <= 1e-9 * eager
