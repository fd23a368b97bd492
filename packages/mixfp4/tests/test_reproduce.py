from mixfp4.reproduce import main

from shared_core.report import Report


def test_reproduce_smoke_writes_a_report(tmp_path):
    assert main(["--smoke", "--out", str(tmp_path)]) == 0
    report = Report.load(tmp_path)
    assert report.package == "mixfp4"
    assert (tmp_path / "report.md").exists()
    claims = {c.name: c for c in report.claims}
    # Two claims are guarantees of the method, so they must hold at any size: the per-block
    # choice never loses to NVFP4, and E2M2 products reproduce dequantize-then-matmul.
    never_worse = claims["MixFP4 never worse than NVFP4 (every distribution)"]
    assert never_worse.held and 0 < never_worse.ours < 1
    datapath = claims["One E2M2 datapath computes MixFP4 GEMMs exactly"]
    assert datapath.held and datapath.ours < 1e-6
    assert len([n for n in claims if n.startswith("MSE ratio on")]) == 4
    # a baseline MixFP4 clearly beats holds at any size (positive control of the strict test)
    assert claims["MixFP4 MSE below 4over6 (every distribution)"].held


def test_claims_against_a_baseline_equal_to_mixfp4_do_not_hold(tmp_path, monkeypatch):
    # Negative control: before the strict test (mean + 2 s.e. < 1 over seeds; < 1 per layer), a
    # ratio of exactly 1 read as held ("lower" with threshold 1 is <=).
    import mixfp4.reproduce as rp
    from mixfp4 import dequantize, quantize_mixfp4

    from shared_core.cli import ReproduceArgs

    def mutant(x, name):
        return dequantize(quantize_mixfp4(x)), 0.0

    monkeypatch.setattr(rp, "fake_quantize_baseline", mutant)
    report = Report("mixfp4", "mutant", tmp_path)
    rp._section_tensors(report, ReproduceArgs(out=tmp_path, size="smoke", seed=0))
    rp._layer_claims(report, [{"layer": "l", "MixFP4/IF4 MSE": 1.0, "MixFP4/4over6 MSE": 1.0}])
    claims = {c.name: c for c in report.claims}
    for label in ("IF4", "4over6"):
        for where in ("every distribution", "every MiniLM linear layer"):
            c = claims[f"MixFP4 MSE below {label} ({where})"]
            assert not c.held and c.ours == 1.0, c
