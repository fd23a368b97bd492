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
