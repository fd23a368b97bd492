"""The benchmark scripts run end to end at toy sizes (they are what a GPU box runs at full size)."""

import importlib.util
import json
import re
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"spu_bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_throughput_reports_ratios_and_caps(tmp_path, capsys):
    bench = _load("throughput")
    out = tmp_path / "t.json"
    args = ["--lengths", "32", "64", "--models", "SPU", "Hyena", "Transformer", "--d-model", "16",
            "--layers", "1", "--batch", "2", "--repeats", "1", "--no-cpu-memory",
            "--out", str(out)]  # fmt: skip
    assert bench.main(args) == 0
    rows = json.loads(out.read_text())["rows"]
    assert {r["model"] for r in rows} == {"SPU", "Hyena", "Transformer"}
    fastest = min(r["seconds"] for r in rows if r["L"] == 64 and r["model"] != "SPU")
    spu = next(r for r in rows if r["L"] == 64 and r["model"] == "SPU")
    assert abs(spu["time_over_fastest_peer"] - spu["seconds"] / fastest) < 1e-12
    assert json.loads(out.read_text())["scaling"] == []  # no L >= 4 k: nothing to check
    # the interleaved 2L/L check, its tolerance two standard errors of the median ratio
    code = bench.main([*args, "--scaling-min", "32"])
    (check,) = json.loads(out.read_text())["scaling"]
    assert check["L"] == 32 and check["repeats"] == 1 and check["two_se"] == 0.0
    assert check["ok"] == (check["ratio"] <= 2.4) and code == (0 if check["ok"] else 1)
    # a time cap of zero records every model as over it instead of dropping it
    assert bench.main([*args[:-2], "--time-cap", "0", "--out", str(out)]) == 0
    assert all("over time cap" in r["status"] for r in json.loads(out.read_text())["rows"])


def test_throughput_scaling_only_times_each_model_with_spu_as_the_check(tmp_path):
    bench = _load("throughput")
    out = tmp_path / "s.json"
    args = ["--scaling-only", "--lengths", "32", "64", "--models", "SPU", "Hyena", "--d-model",
            "16", "--layers", "1", "--batch", "2", "--repeats", "1", "--scaling-min", "32",
            "--out", str(out)]  # fmt: skip
    code = bench.main(args)
    result = json.loads(out.read_text())
    assert result["rows"] == []  # no throughput rounds
    spu, hyena = result["scaling"]
    assert (spu["model"], spu["L"], hyena["model"], hyena["L"]) == ("SPU", 32, "Hyena", 32)
    assert spu["ok"] == (spu["ratio"] <= 2.4 + spu["two_se"]) and "ok" not in hyena  # the reference
    assert code == (0 if spu["ok"] else 1)
    assert spu["name"] == "SPU L=64" and spu["baseline_name"] == "SPU L=32"


# repeats 4 and an interquartile range of 1.349: s.e. = 1.2533 * 1 / sqrt(4), so the check's bound is
# 2.4 + 2 s.e. = 3.6533
@pytest.mark.parametrize(("ratio", "ok"), [(3.64, True), (3.67, False), (2.5, True), (1.0, True)])
def test_scaling_check_holds_within_two_standard_errors_of_2_4_and_sets_the_exit_code(
    tmp_path, monkeypatch, ratio, ok
):
    from shared_core.bench import Comparison

    bench = _load("throughput")
    calls = []

    def fake_compare(candidate, baseline, *, name, baseline_name, repeats, warmup):
        calls.append(name)  # the steps are not run: the comparison is made up
        return Comparison(name, baseline_name, ratio, ratio - 0.6745, ratio + 0.6745, 2.0, 1.0, 4)

    monkeypatch.setattr(bench, "compare", fake_compare)
    out = tmp_path / "s.json"
    args = ["--scaling-only", "--lengths", "32", "64", "--models", "SPU", "Hyena", "--d-model",
            "16", "--layers", "1", "--batch", "2", "--scaling-min", "32", "--out", str(out)]  # fmt: skip
    assert bench.main(args) == (0 if ok else 1)
    spu, hyena = json.loads(out.read_text())["scaling"]
    assert calls == ["SPU L=64", "Hyena L=64"]
    assert spu["two_se"] == pytest.approx(1.2533) and spu["ok"] is ok and "ok" not in hyena
    assert bench.scaling_ok(ratio, 1.2533 / 2) is ok


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--lengths", "32", "128", "--models", "SPU", "--scaling-min", "32"], r"--lengths \[32, 128\]"),
        (["--lengths", "4096", "--models", "SPU"], r"--scaling-min 4096 .*--lengths \[4096\]"),
        (["--lengths", "32", "128", "--models", "SPU"], r"--lengths \[32, 128\]"),
        (["--lengths", "32", "64", "--models", "Hyena", "--scaling-min", "32"],
         r"must include SPU, got \['Hyena'\]"),
    ],
)  # fmt: skip
def test_scaling_only_that_would_check_nothing_is_refused_naming_why(argv, match, capsys):
    bench = _load("throughput")
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--scaling-only", *argv])
    assert exit_.value.code == 2
    assert re.search(match, capsys.readouterr().err)


def test_genomic_benchmarks_skips_without_data_and_reads_the_cache_layout(tmp_path, capsys):
    bench = _load("genomic_benchmarks")
    assert bench.main(["--data-dir", str(tmp_path / "none")]) == 0
    assert "skipped" in capsys.readouterr().err
    for split in ("train", "test"):
        for label, base in enumerate("AC"):
            folder = tmp_path / "demo_human_or_worm" / split / f"class{label}"
            folder.mkdir(parents=True)
            for i in range(6):
                (folder / f"{i}.txt").write_text(base * 20 + "GT" * i)
    args = ["--data-dir", str(tmp_path), "--datasets", "demo_human_or_worm", "--epochs", "1",
            "--d-model", "16", "--layers", "1"]  # fmt: skip
    assert bench.main(args) == 0
    result = json.loads(capsys.readouterr().out)["results"]["demo_human_or_worm"]
    assert result["n_test"] == 12 and 0 <= result["accuracy"] <= 1


@pytest.mark.slow  # two subprocesses that import torch and transformers
def test_cpu_peak_memory_is_measured_in_a_subprocess_and_grows_with_the_batch():
    bench = _load("throughput")
    args = bench.argparse.Namespace(
        batch=1, d_model=32, layers=1, backend="torch", threads=1, time_cap=60.0
    )
    small = bench.cpu_peak(args, "Hyena", 4096)
    args.batch = 16
    large = bench.cpu_peak(args, "Hyena", 4096)
    assert 0 <= small["step_MiB"] < large["step_MiB"] <= large["peak_rss_MiB"]


def test_ratios_are_to_the_fastest_and_leanest_peer_spu_excluded():
    bench = _load("throughput")
    rows = [{"model": "SPU", "status": "ok", "seconds": 1.0, "step_MiB": 10.0},
            {"model": "Hyena", "status": "ok", "seconds": 4.0, "step_MiB": 40.0},
            {"model": "Mamba", "status": "ok", "seconds": 2.0, "step_MiB": 80.0},
            {"model": "Transformer", "status": "out of memory"}]  # fmt: skip
    bench._ratios(rows)
    assert [r.get("time_over_fastest_peer") for r in rows] == [0.5, 2.0, 1.0, None]
    assert [r.get("memory_over_leanest_peer") for r in rows] == [0.25, 1.0, 2.0, None]


def test_memory_only_probes_each_model_and_length_without_timing(tmp_path, monkeypatch, capsys):
    bench = _load("throughput")
    probed = []

    def peak(args, name, length):
        probed.append((name, length))
        return {"step_MiB": float(length), "peak_rss_MiB": 2.0 * length}

    monkeypatch.setattr(bench, "cpu_peak", peak)
    monkeypatch.setattr(bench, "measure_length", lambda *a: pytest.fail("timed in --memory-only"))
    out = tmp_path / "mem.json"
    argv = ["--memory-only", "--device", "cpu", "--lengths", "64", "--models", "SPU", "Hyena"]
    assert bench.main([*argv, "--out", str(out)]) == 0
    assert probed == [("SPU", 64), ("Hyena", 64)]
    assert json.loads(out.read_text())["rows"][1] == {
        "model": "Hyena",
        "L": 64,
        "step_MiB": 64.0,
        "peak_rss_MiB": 128.0,
    }
