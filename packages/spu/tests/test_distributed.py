"""DDP on CPU: two gloo processes (torchrun, spawned), each on half of the global batch, end where one
process on the whole batch ends."""

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

WORKER = Path(__file__).with_name("spu_ddp_worker.py")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not dist.is_available(), reason="torch.distributed unavailable"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ddp_two_gloo_processes_match_one_process_on_the_same_global_batch(tmp_path):
    one, two = tmp_path / "one.pt", tmp_path / "two.pt"
    subprocess.run([sys.executable, str(WORKER), str(one)], check=True, timeout=300)
    subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
         "--master_port", str(_free_port()), str(WORKER), str(two)],
        check=True,
        timeout=300,
    )  # fmt: skip
    single, ddp = torch.load(one), torch.load(two)
    assert single.keys() == ddp.keys()
    for name, value in single.items():
        torch.testing.assert_close(ddp[name], value, atol=1e-5, rtol=1e-4, msg=name)
    # the steps moved the weights: the comparison is not between two untrained models
    torch.manual_seed(0)
    from spu_dna import SPUConfig, SPUForSequenceClassification

    start = SPUForSequenceClassification(
        SPUConfig(d_model=16, n_layers=2, lpl_groups=4, dpl_max_len=24, dropout=0.0)
    ).state_dict()
    assert any(not torch.equal(start[k], v) for k, v in single.items())
