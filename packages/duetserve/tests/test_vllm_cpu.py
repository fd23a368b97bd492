"""vLLM's CPU build serving with DuetServe's scheduler (slow: minutes; needs vllm-cpu).

Runs benchmarks/vllm_cpu_e2e.py: `vllm serve` of a random-init tiny Qwen3 on 127.0.0.1 with
DuetScheduler and with the default scheduler, a bounded 32-request loop each, greedy fp32 outputs
compared, and the logged plans' invariants checked.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "vllm_cpu_e2e.py"


@pytest.mark.slow
def test_vllm_cpu_serves_every_request_with_duet_scheduler(tmp_path):
    pytest.importorskip("vllm")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path)], timeout=2400, check=False
    )
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["all_completed"], result["runs"]
    assert result["plans"]["ok"] and result["plans"]["capped_steps"] > 0, result["plans"]
    assert result["greedy_identical"] == result["runs"]["duet"]["requests"], result["divergences"]
    assert proc.returncode == 0
