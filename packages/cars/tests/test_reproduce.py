from cars_sampling.reproduce import main

from shared_core.report import Report


def test_reproduce_smoke_writes_a_report(tmp_path):
    assert main(["--smoke", "--out", str(tmp_path)]) == 0
    report = Report.load(tmp_path)
    assert report.package == "cars-sampling"
    assert (tmp_path / "report.md").exists()
    names = [c.name for c in report.claims]
    assert any("GCD is biased" in n for n in names)
    assert any("(a) paper's regime" in n for n in names)
    assert any("cone-masked mutant" in n for n in names)
    assert any(t.startswith("xgrammar backend") for t in report.tables)  # run, or skipped
    # wall time is descriptive only: one sequential run per style cannot carry a claim
    assert not any("wall" in n or "seconds" in n for n in names)
    assert len(report.tables) == 4 and (tmp_path / "acceptance.png").exists()


def test_xgrammar_section_says_it_is_skipped_when_xgrammar_is_absent(tmp_path, monkeypatch, capsys):
    import sys

    from cars_sampling.reproduce import XGRAMMAR_MISSING

    monkeypatch.setitem(sys.modules, "xgrammar", None)  # `import xgrammar` raises ImportError
    assert main(["--smoke", "--only", "xgrammar", "--out", str(tmp_path)]) == 0
    assert XGRAMMAR_MISSING in capsys.readouterr().err
    assert XGRAMMAR_MISSING in (tmp_path / "report.md").read_text()
    report = Report.load(tmp_path)
    assert report.tables == {"xgrammar backend (skipped)": [{"status": XGRAMMAR_MISSING}]}
    assert report.claims == []  # only the named section ran
