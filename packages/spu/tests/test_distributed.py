"""DDP on CPU: two gloo processes (torchrun, spawned), each on half of the global batch, end where one
process on the whole batch ends.

The launches cannot hang the suite: each has a wall-clock limit, after which torchrun is asked to stop
(SIGTERM: it tears its workers down), then it and every worker (their pids in ``OUT.pid.<rank>``;
torchrun starts each worker in its own session, out of reach of a kill of torchrun's group) are
killed, and the test fails with their output. ``--standalone`` lets the rendezvous bind a free port
itself: no port picked here that another process could take before torchrun binds it. A worker whose
peer died fails after its own 60 s instead of gloo's 30 minutes.
"""

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

WORKER = Path(__file__).with_name("spu_ddp_worker.py")
LIMIT_S = 300  # each launch; both take ~10-30 s on an idle CPU, minutes on a loaded one

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not dist.is_available(), reason="torch.distributed unavailable"),
]


def _kill_workers(out: Path) -> None:
    """SIGKILL every worker that wrote a pid file beside ``out`` and still runs the worker script
    (its /proc command line names it: a reused pid is left alone)."""
    for pid_file in out.parent.glob(f"{out.name}.pid.*"):
        pid = int(pid_file.read_text())
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue  # gone (or no /proc): nothing to kill
        if WORKER.name.encode() in cmdline:
            os.kill(pid, signal.SIGKILL)


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group has already exited
        os.killpg(pid, sig)


def launch(command: list[str], out: Path, limit_s: float = LIMIT_S) -> str:
    """Run ``command`` (its own session) to completion within ``limit_s``; return its output. On
    timeout or a non-zero exit, kill it and its workers and fail with their output."""
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        output, _ = proc.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        _signal_group(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL follows
            proc.wait(timeout=15)
        # workers hold the output pipe open: kill them before reading it to the end
        _kill_workers(out)
        _signal_group(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate(timeout=30)
        pytest.fail(
            f"{' '.join(command)} ran past {limit_s} s; killed it and its workers:\n{output}"
        )
    if proc.returncode != 0:
        _kill_workers(out)
        pytest.fail(f"{' '.join(command)} exited with {proc.returncode}:\n{output}")
    return output


def _alive(pid: int) -> bool:
    """``pid`` runs (a zombie, killed and waiting for init to reap it, does not)."""
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")
def test_launch_kills_a_hung_run_and_its_workers(tmp_path):
    """A launcher past its limit whose worker runs in its own session (as torchrun starts them) and
    holds the output pipe: the launch fails with their output and leaves no worker alive."""
    out = tmp_path / "hang.pt"
    script = tmp_path / WORKER.name  # named like the worker, so that _kill_workers recognises it
    script.write_text(
        "import os, subprocess, sys, time\n"
        "if len(sys.argv) == 2:  # the launcher: one worker in a new session, then wait\n"
        "    subprocess.Popen([sys.executable, __file__, sys.argv[1], '0'], start_new_session=True)\n"
        "else:\n"
        "    open(sys.argv[1] + '.pid.0', 'w').write(str(os.getpid()))\n"
        "    print('worker started', flush=True)\n"
        "time.sleep(600)\n"
    )
    with pytest.raises(pytest.fail.Exception, match=r"ran past 10 s(.|\n)*worker started"):
        launch([sys.executable, str(script), str(out)], out, limit_s=10)
    worker = int(Path(f"{out}.pid.0").read_text())
    deadline = time.monotonic() + 10
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(worker)


def test_ddp_two_gloo_processes_match_one_process_on_the_same_global_batch(tmp_path):
    one, two = tmp_path / "one.pt", tmp_path / "two.pt"
    launch([sys.executable, str(WORKER), str(one)], one)
    launch(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         str(WORKER), str(two)],
        two,
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
