import json

from symdyn_id.reproduce import main

from shared_core.report import Report


def test_reproduce_smoke_writes_a_report(tmp_path):
    assert main(["--smoke", "--out", str(tmp_path)]) == 0
    report = Report.load(tmp_path)
    assert report.package == "symdyn-id"
    assert (tmp_path / "report.md").exists() and (tmp_path / "error_vs_T.png").exists()
    data = json.loads((tmp_path / "result.json").read_text())
    names = [c["name"] for c in data["claims"]]
    assert any("exact at T*" in n for n in names) and any("reaches T*" in n for n in names)
    lengths = {row["family"]: row for row in data["tables"]["lengths"]}
    # the smoke size is tiny, but the exactness at T* is already measured there
    assert all(row["known LS first exact T (median)"] == row["T*"] for row in lengths.values())
