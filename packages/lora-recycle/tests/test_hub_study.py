"""scripts/hub_study.py (the GPU study on real weights) parses its arguments and reads task files."""

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "hub_study.py"


def _load():
    spec = importlib.util.spec_from_file_location("hub_study", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_help_and_task_reading(tmp_path, monkeypatch, capsys):
    study = _load()
    monkeypatch.setattr("sys.argv", ["hub_study.py", "--help"])
    with pytest.raises(SystemExit) as info:
        study.main()
    assert info.value.code == 0 and "--adapters" in capsys.readouterr().out
    task = tmp_path / "t.jsonl"
    task.write_text(
        "\n".join(json.dumps({"prompt": f"q{i}", "answer": f"a{i}"}) for i in range(101))
    )
    rows = study.read_task(task)
    assert rows[0] == ([{"role": "user", "content": "q0"}], "a0") and len(rows) == 101
    task.write_text("\n".join(json.dumps({"prompt": "q", "answer": "a"}) for _ in range(100)))
    with pytest.raises(ValueError, match="more than 100"):
        study.read_task(task)
