"""DuetServe's vLLM scheduler against vLLM's default on a GPU: P99 TBT and goodput (NOT RUN YET).

    python benchmarks/vllm_e2e.py --model Qwen/Qwen3-8B --out OUT [--rate 2.0 --requests 200]

Needs a GPU machine with vLLM installed (0.32-0.33) and the model's weights, or ``--load-format
dummy`` with a local config for a random-init model of the same shape. For each scheduler it starts
``vllm serve`` on 127.0.0.1, replays a Mooncake-style trace (prompts of random words with the
trace's lengths, Poisson arrivals at ``--rate``) with streaming completions under a hard
``--limit-s``, and records per-token arrival times. Reported per scheduler: P50/P99 TBT (gaps
between streamed tokens), P99 TTFT, goodput (requests meeting TBT <= ``--tbt-slo-s`` and TTFT <=
``--ttft-slo-s`` per second), and the plan log's capped steps for DuetServe.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from duetserve import poisson_trace
from vllm_cpu_e2e import WORDS, free_port, stop


def stream_one(
    url: str, model: str, prompt: str, max_tokens: int, deadline: float
) -> dict[str, Any]:
    body = {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "stream": True,
        "ignore_eos": True,
    }
    req = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    t0 = time.perf_counter()
    stamps = []
    with urllib.request.urlopen(req, timeout=max(deadline - t0, 1)) as resp:
        for line in resp:
            if line.startswith(b"data: ") and not line.startswith(b"data: [DONE]"):
                stamps.append(time.perf_counter())
    return {"ttft": stamps[0] - t0 if stamps else float("nan"), "tbt": np.diff(stamps).tolist()}


def run(args: argparse.Namespace, name: str, scheduler: str | None, extra: dict | None) -> dict:
    import subprocess

    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.cli.main",
        "serve",
        args.model,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--seed",
        "0",
        *args.vllm_args,
    ]
    if scheduler:
        cmd += ["--scheduler-cls", scheduler, "--additional-config", json.dumps(extra)]
    log = (args.out / f"serve-{name}.log").open("wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        t0 = time.perf_counter()
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.perf_counter() - t0 > args.start_limit_s:
                    raise RuntimeError(f"vllm serve did not start; see {log.name}") from None
                time.sleep(2)
        trace = poisson_trace(args.rate, args.requests, "mooncake", seed=0)
        url = f"http://127.0.0.1:{port}/v1/completions"
        deadline = time.perf_counter() + args.limit_s
        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(64) as pool:
            futures = []
            for r in trace:
                time.sleep(max(0.0, start + r.arrival - time.perf_counter()))
                if time.perf_counter() > deadline:
                    break
                prompt = " ".join(WORDS[(r.id + j) % len(WORDS)] for j in range(r.prompt_len))
                futures.append(
                    pool.submit(
                        stream_one, url, args.model, prompt, min(r.output_len, 512), deadline
                    )
                )
            done = [f.result() for f in futures]
        wall = time.perf_counter() - start
    finally:
        stop(proc)
    tbt = np.concatenate([d["tbt"] for d in done if d["tbt"]])
    good = [
        d
        for d in done
        if d["ttft"] <= args.ttft_slo_s
        and (not d["tbt"] or np.quantile(d["tbt"], 0.99) <= args.tbt_slo_s)
    ]
    return {
        "requests": len(done),
        "p50_tbt_ms": 1e3 * float(np.quantile(tbt, 0.5)),
        "p99_tbt_ms": 1e3 * float(np.quantile(tbt, 0.99)),
        "p99_ttft_s": float(np.nanquantile([d["ttft"] for d in done], 0.99)),
        "goodput_rps": len(good) / wall,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", type=Path, default=Path("vllm-e2e"))
    ap.add_argument("--rate", type=float, default=2.0)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--limit-s", type=float, default=420.0)
    ap.add_argument("--start-limit-s", type=float, default=600.0)
    ap.add_argument("--tbt-slo-s", type=float, default=0.05)
    ap.add_argument("--ttft-slo-s", type=float, default=3.0)
    ap.add_argument("--hardware", default="H100", help="H100, H200 or a measured profile.json")
    ap.add_argument("vllm_args", nargs="*", help="extra `vllm serve` arguments, after --")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    plan_log = args.out / "plans.jsonl"
    extra = {
        "duetserve": {
            "tbt_slo_s": args.tbt_slo_s,
            "hardware": args.hardware,
            "plan_log": str(plan_log),
        }
    }
    result = {
        "duet": run(args, "duet", "duetserve.integrations.vllm.DuetScheduler", extra),
        "default": run(args, "default", None, None),
    }
    (args.out / "result.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
