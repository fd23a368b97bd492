import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "geometry_replication.py"


def _script():
    spec = importlib.util.spec_from_file_location("geometry_replication", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--setting", "bimodal, M = 2"], "invalid choice"),
        (["--seeds", "3", "4", "3"], "--seeds must be distinct"),
    ],
)
def test_bad_arguments_are_rejected_before_any_training(argv, message, capsys, monkeypatch):
    module = _script()
    monkeypatch.setattr(module.rep, "_train_and_test", lambda *a, **k: pytest.fail("trained"))
    with pytest.raises(SystemExit):
        module.main(argv)
    assert message in capsys.readouterr().err
