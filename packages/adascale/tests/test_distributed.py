"""fit and evaluate under torch.distributed (gloo, two CPU processes) equal one process."""

import importlib.util
import json
import socket
import subprocess
import sys
from pathlib import Path

WORKER = Path(__file__).resolve().parent / "dist_worker.py"


def test_two_gloo_processes_match_one(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(r), "2", str(port), str(tmp_path / f"{r}.json")]
        )
        for r in (0, 1)
    ]
    spec = importlib.util.spec_from_file_location("dist_worker", WORKER)
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)
    worker.main(0, 1, 0, str(tmp_path / "single.json"))  # the same script without a group
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    single = json.loads((tmp_path / "single.json").read_text())
    assert 0.5 < single["adascale"]["AUROC"] < 1  # a comparison that can differ
    for rank in (0, 1):
        ranked = json.loads((tmp_path / f"{rank}.json").read_text())
        assert ranked.keys() == single.keys()
        for name, metrics in single.items():
            for key, value in metrics.items():
                assert abs(ranked[name][key] - value) < 1e-9, (rank, name, key)
