import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "paper_protocol.py"


def _load(monkeypatch):
    spec = importlib.util.spec_from_file_location("paper_protocol", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "paper_protocol", module)  # dataclasses look it up
    spec.loader.exec_module(module)
    return module


def test_paper_protocol_runs_every_method_at_toy_sizes(tmp_path, monkeypatch):
    protocol = _load(monkeypatch)
    out = tmp_path / "protocol.json"
    results = protocol.main(["--tiny", "--out", str(out)])
    assert [r["method"] for r in results] == list(protocol.METHODS)
    assert {"MRR (grid gains)", "Euclidean (grid gains)"} <= set(protocol.METHODS)
    assert all(math.isfinite(r["rms_error"]) and r["rms_error"] > 0 for r in results)
    assert json.loads(out.read_text()) == results
    with pytest.raises(ValueError, match="method must be one of"):
        protocol.job(0, 2, "Richards", protocol.TINY)
