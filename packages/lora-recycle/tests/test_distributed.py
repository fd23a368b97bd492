"""Two gloo processes (torchrun) train the same merge as one process."""

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("lora_ddp_worker.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_gloo_processes_match_one(tmp_path):
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    subprocess.run([sys.executable, str(WORKER), str(one), "8"], check=True, timeout=600)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_port",
            str(_free_port()),
            str(WORKER),
            str(two),
            "4",
        ],
        check=True,
        timeout=600,
    )
    a, b = json.loads(one.read_text()), json.loads(two.read_text())
    assert a["best_step"] == b["best_step"]
    assert [s for s, _ in a["history"]] == [s for s, _ in b["history"]]
    for (_, la), (_, lb) in zip(a["history"], b["history"], strict=True):
        assert la == pytest.approx(lb, rel=1e-5)
    for name, coefficients in a["coefficients"].items():
        assert coefficients == pytest.approx(b["coefficients"][name], rel=1e-5, abs=1e-6)
    assert any(
        abs(c) > 1e-3 for cs in a["coefficients"].values() for c in cs
    )  # training moved them
