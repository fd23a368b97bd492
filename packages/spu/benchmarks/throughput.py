"""Throughput and peak memory of SPU against its peers, forward + backward, in one run.

    python packages/spu/benchmarks/throughput.py                       # the issue's sizes (a GPU)
    python packages/spu/benchmarks/throughput.py --lengths 1024 2048 4096 --repeats 3   # CPU
    python packages/spu/benchmarks/throughput.py --scaling-only --models SPU Hyena --lengths 4096 8192

Batch 8, d = 128, 4 layers (issue 22). Per length the models run interleaved (one step of each per
round, ``repeats`` rounds) and each model's median time is kept; tokens/s and peak memory are reported
with the ratio of each model's time to the fastest peer's and of its memory to the leanest peer's. Peak
memory on CUDA is ``max_memory_allocated``; on CPU, where torch keeps no such counter, each model runs one
step in a fresh subprocess and the growth of its resident-set high-water mark (``VmHWM``, Linux) over
that step is kept (``step_MiB``; activations, gradients and workspace; ``peak_rss_MiB`` is the whole process,
interpreter and libraries included). A model that runs out of memory or past ``--time-cap`` seconds is
recorded as such, not dropped.

Then checks that SPU's time(2L)/time(L) <= 2.4 for every L >= 4 k with 2L measured too (spec section
6): one model timed at L and 2L interleaved (``shared_core.bench.compare``), the median of per-pair
ratios. The issue's "generous tolerance" is fixed as two standard errors of that median (from its
quartiles; :func:`spu_dna.reproduce.median_ratio_se`), the same rule as the reproduction's claim.
``--scaling-only`` runs that check alone, for each of ``--models`` (a peer's ratio is the reference).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from typing import Any

import torch
from spu_dna import SPUConfig, SPUForSequenceClassification
from spu_dna.baselines import HyenaClassifier, MambaClassifier, TransformerClassifier
from spu_dna.reproduce import QUASI_LINEAR, median_ratio_se

from shared_core.bench import compare, time_once
from shared_core.report import claim_holds


def build(name: str, length: int, d: int, layers: int, backend: str) -> torch.nn.Module:
    if name == "SPU":
        config = SPUConfig(
            d_model=d, n_layers=layers, dpl_max_len=length, dropout=0.0, backend=backend
        )
        return SPUForSequenceClassification(config)
    if name == "Transformer":
        return TransformerClassifier(d_model=d, n_layers=layers)
    if name == "Hyena":
        return HyenaClassifier(d_model=d, n_layers=layers)
    return MambaClassifier(d_model=d, n_layers=layers)


def step_fn(model: torch.nn.Module, batch: int, length: int, device: str) -> Any:
    ids = torch.randint(5, 9, (batch, length), device=device)
    labels = torch.randint(0, 2, (batch,), device=device)

    def step() -> None:
        model.zero_grad(set_to_none=True)
        model(input_ids=ids, labels=labels).loss.backward()

    return step


def _timed(args: argparse.Namespace, step: Any, row: dict[str, Any]) -> float | None:
    """One timed step; ``None`` (and ``row["status"]`` set) when it runs out of memory."""
    try:
        if args.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        seconds = time_once(step)
        if args.device == "cuda":
            peak = torch.cuda.max_memory_allocated() / 2**30
            row["peak_GiB"] = max(row.get("peak_GiB", 0.0), peak)
        return seconds
    except torch.OutOfMemoryError:
        row["status"] = "out of memory"
        if args.device == "cuda":
            torch.cuda.empty_cache()
        return None


def _child_argv(args: argparse.Namespace, name: str, length: int) -> list[str]:
    return [sys.executable, __file__, "--peak-child", name, "--lengths", str(length),
            "--batch", str(args.batch), "--d-model", str(args.d_model),
            "--layers", str(args.layers), "--backend", args.backend, "--device", "cpu",
            "--threads", str(args.threads)]  # fmt: skip


def cpu_peak(args: argparse.Namespace, name: str, length: int) -> dict[str, float]:
    """``{"step_MiB", "peak_rss_MiB"}`` of one forward + backward of ``name`` on CPU, measured in a
    fresh process so that no other model's high-water mark counts (see the module docstring)."""
    done = subprocess.run(
        _child_argv(args, name, length), capture_output=True, text=True, timeout=args.time_cap + 600
    )
    if done.returncode != 0:
        raise RuntimeError(f"memory probe of {name} at L={length} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def _status_kib(field: str) -> int:
    """``field`` (``VmRSS``, ``VmHWM``) of this process from /proc/self/status, in KiB (Linux)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _peak_child(args: argparse.Namespace) -> None:
    """The subprocess of :func:`cpu_peak`: build, step once, print the high-water growth.

    ``ru_maxrss`` survives ``exec`` (a child forked from a large parent starts at the parent's mark),
    so the mark is the memory map's own ``VmHWM``, reset just before the step (``clear_refs`` 5)."""
    torch.manual_seed(0)
    length = args.lengths[0]
    step = step_fn(build(args.peak_child, length, args.d_model, args.layers, args.backend),
                   args.batch, length, "cpu")  # fmt: skip
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # reset VmHWM to the current resident set
    before = _status_kib("VmRSS")
    step()
    after = _status_kib("VmHWM")
    print(json.dumps({"step_MiB": (after - before) / 1024, "peak_rss_MiB": after / 1024}))


def _ratios(rows: list[dict[str, Any]]) -> None:
    """Each model's time over the fastest peer's and memory over the leanest peer's (SPU excluded
    from the peers)."""
    ok = [r for r in rows if r["status"] == "ok"]
    for key, ratio in (("seconds", "time_over_fastest_peer"), ("peak_GiB", "memory_over_leanest_peer"),
                       ("step_MiB", "memory_over_leanest_peer")):  # fmt: skip
        peers = [r[key] for r in ok if r["model"] != "SPU" and key in r]
        for row in ok:
            if key in row:
                row[ratio] = row[key] / min(peers) if peers and min(peers) > 0 else float("nan")


def measure_length(args: argparse.Namespace, length: int) -> list[dict[str, Any]]:
    """Every model at one length, interleaved: warm-up (and time-cap probe), then rounds."""
    rows: list[dict[str, Any]] = []
    steps: dict[str, Any] = {}
    times: dict[str, list[float]] = {}
    for name in args.models:
        row: dict[str, Any] = {"model": name, "L": length, "status": "ok"}
        rows.append(row)
        try:
            model = build(name, length, args.d_model, args.layers, args.backend).to(args.device)
        except torch.OutOfMemoryError:
            row["status"] = "out of memory"
            continue
        step = step_fn(model, args.batch, length, args.device)
        first = _timed(args, step, row)
        if first is not None and first > args.time_cap:
            row["status"] = f"over time cap ({first:.1f} s > {args.time_cap} s)"
        if row["status"] == "ok":
            steps[name], times[name] = step, []
    for _ in range(args.repeats):
        for row in rows:
            name = row["model"]
            if row["status"] == "ok":
                seconds = _timed(args, steps[name], row)
                if seconds is not None:
                    times[name].append(seconds)
    for row in rows:
        if row["status"] == "ok":
            row["seconds"] = statistics.median(times[row["model"]])
            row["tokens_per_s"] = args.batch * length / row["seconds"]
            if args.device == "cpu" and args.cpu_memory:
                row.update(cpu_peak(args, row["model"], length))
    _ratios(rows)
    return rows


def scaling_pairs(lengths: list[int], minimum: int) -> list[int]:
    """Each L >= ``minimum`` in ``lengths`` whose 2L is in ``lengths`` too: the L of each 2L/L check."""
    return [n for n in sorted(set(lengths)) if n >= minimum and 2 * n in lengths]


def scaling_ok(ratio: float, se: float) -> bool:
    """The check: time(2L)/time(L) <= 2.4 within two standard errors of the median ratio (the
    reproduction's claim rule, ``claim_holds``)."""
    return claim_holds(ratio, QUASI_LINEAR, "lower", 2 * se)


def scaling_checks(
    args: argparse.Namespace, lengths: list[int], names: list[str]
) -> list[dict[str, Any]]:
    """time(2L)/time(L) of each model in ``names``, interleaved, for each L of
    :func:`scaling_pairs`; SPU's row holds the check (``ok``), a peer's is the reference."""
    checks = []
    for length in scaling_pairs(lengths, args.scaling_min):
        for name in names:
            # one model per length, the same seed (the same weights): a model built for 2L would
            # refit SPU's global filter to L on every call (functional.fit_filter)
            steps = []
            for n in (2 * length, length):
                torch.manual_seed(0)
                model = build(name, n, args.d_model, args.layers, args.backend).to(args.device)
                steps.append(step_fn(model, args.batch, n, args.device))
            comparison = compare(
                *steps, name=f"{name} L={2 * length}", baseline_name=f"{name} L={length}",
                repeats=args.repeats, warmup=1,
            )  # fmt: skip
            row = comparison.as_row()
            se = median_ratio_se(row)
            check = {"model": name, "L": length, **row, "two_se": 2 * se}
            if name == "SPU":
                check["ok"] = scaling_ok(comparison.ratio, se)
            checks.append(check)
    return checks


def _memory_only(args: argparse.Namespace) -> int:
    """Each model's step memory at each length on CPU (one fresh subprocess each), as JSON rows."""
    rows = [{"model": name, "L": length, **cpu_peak(args, name, length)}
            for length in args.lengths for name in args.models]  # fmt: skip
    _write(args, {"device": "cpu", "settings": vars(args), "rows": rows})
    return 0


def _write(args: argparse.Namespace, result: dict[str, object]) -> None:
    text = json.dumps(result, indent=2, default=str)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 8192, 16384, 32768])
    parser.add_argument("--models", nargs="+", default=["SPU", "Transformer", "Mamba", "Hyena"])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--time-cap", type=float, default=120.0)
    parser.add_argument("--backend", default="auto", help="SPU's token-conv backend")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--scaling-min", type=int, default=4096, help="check 2L/L from this L")
    parser.add_argument("--out", help="write the rows as JSON here")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--no-cpu-memory", dest="cpu_memory", action="store_false",
                        help="on CPU, skip the per-model memory subprocesses")  # fmt: skip
    parser.add_argument("--memory-only", action="store_true",
                        help="CPU: only each model's step memory (cpu_peak), no timing")  # fmt: skip
    parser.add_argument("--scaling-only", action="store_true",
                        help="only time(2L)/time(L) of each of --models (SPU's is the check)")  # fmt: skip
    parser.add_argument("--peak-child", help=argparse.SUPPRESS)  # the subprocess of cpu_peak
    args = parser.parse_args(argv)
    if args.scaling_only:  # a run that would check nothing is an error, not a silent pass
        if "SPU" not in args.models:
            parser.error(f"--scaling-only checks SPU (a peer is only the reference): --models "
                         f"must include SPU, got {args.models}")  # fmt: skip
        if not scaling_pairs(args.lengths, args.scaling_min):
            parser.error(f"--scaling-only needs a length L >= --scaling-min {args.scaling_min} with "
                         f"2L also in --lengths, got --lengths {args.lengths}")  # fmt: skip
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.peak_child:
        _peak_child(args)
        return 0
    if args.memory_only:
        return _memory_only(args)
    rows = []
    for length in [] if args.scaling_only else args.lengths:
        rows += measure_length(args, length)
        print(json.dumps(rows[-len(args.models) :]), file=sys.stderr)
    if args.scaling_only:
        checks = scaling_checks(args, args.lengths, args.models)
    else:  # SPU at the lengths it ran (within memory and the time cap)
        ran = [r["L"] for r in rows if r["model"] == "SPU" and r["status"] == "ok"]
        checks = scaling_checks(args, ran, ["SPU"])
    result: dict[str, object] = {"device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
              "settings": vars(args), "rows": rows, "scaling": checks}  # fmt: skip
    _write(args, result)
    return 0 if all(c.get("ok", True) for c in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
