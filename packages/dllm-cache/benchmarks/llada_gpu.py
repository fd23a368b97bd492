"""LLaDA-8B-Instruct with the paper's settings, where the weights and a GPU exist (not run here).

    python packages/dllm-cache/benchmarks/llada_gpu.py --model GSAI-ML/LLaDA-8B-Instruct \
        --preset llada-instruct-gsm8k --prompts prompts.txt

Loads the checkpoint with ``trust_remote_code`` in bfloat16, runs each prompt (one per line of
``--prompts``, chat template applied; ``--long-prompt N`` adds a synthetic HotpotQA-like prompt of
about N tokens: ten "passages" and a two-hop question) without and with dLLM-Cache at a preset of
``dllm_cache.PRESETS``. Each arm is warmed up, then timed ``--repeats`` times interleaved; the
script prints the median and spread of tokens per second, the counted-FLOPs ratio of the blocks,
the token agreement of the cached output with the uncached one, the date and the card. Exits
with a message when no CUDA device or no weights are available. Not run here (no GPU).
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from dllm_cache import PRESETS, apply_dllm_cache, generate

LLADA_MASK_ID = 126336
DEFAULT_PROMPTS = [
    "Lily can run 12 kilometers per hour for 4 hours. After that, she runs 6 kilometers per hour. "
    "How many kilometers can she run in 8 hours?",
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?",
]


def hotpot_like_prompt(tokens: int) -> str:
    """A synthetic LongBench-HotpotQA-style prompt of roughly ``tokens`` tokens (about 1.3 tokens
    per word): ten passages of filler facts and a two-hop question about two of them."""
    passages = []
    words_per_passage = max(20, int(tokens / 1.3 / 10))
    for i in range(10):
        facts = [
            f"The river {chr(65 + i)}{j} flows through the town of T{i}{j}." for j in range(200)
        ]
        text = " ".join(" ".join(facts).split()[:words_per_passage])
        passages.append(f"Passage {i + 1}:\n{text}")
    question = "Which town does the river C3 flow through, and which river flows through T73?"
    return "\n\n".join(passages) + f"\n\nAnswer the question based on the passages.\n{question}"


def _timed(fn, repeats: int) -> tuple[list[float], object]:
    fn()  # warm-up: kernels, allocator, remote-code caches
    times, out = [], None
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        out = fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return times, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="GSAI-ML/LLaDA-8B-Instruct")
    parser.add_argument("--preset", default="llada-instruct-gsm8k", choices=sorted(PRESETS))
    parser.add_argument("--prompts", help="a text file, one prompt per line")
    parser.add_argument("--long-prompt", type=int, default=4000, help="0: no synthetic long prompt")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: this script needs a GPU", file=sys.stderr)
        return 0
    from transformers import AutoModel, AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(args.model, trust_remote_code=True)
        model = AutoModel.from_pretrained(
            args.model, trust_remote_code=True, torch_dtype=torch.bfloat16
        )
    except OSError as exc:
        print(f"weights not available ({exc}); nothing to run", file=sys.stderr)
        return 0
    model = model.cuda().eval()
    preset = PRESETS[args.preset]
    gen_length, config = preset.gen_length, preset.config
    texts = Path(args.prompts).read_text().splitlines() if args.prompts else list(DEFAULT_PROMPTS)
    if args.long_prompt:
        texts.append(hotpot_like_prompt(args.long_prompt))
    kw = dict(mask_id=LLADA_MASK_ID, **preset.generate_kwargs())
    print(json.dumps({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                      "card": torch.cuda.get_device_name(), "preset": args.preset}), flush=True)  # fmt: skip
    rows = []
    for text in texts:
        chat = tok.apply_chat_template(
            [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
        )
        ids = tok(chat, return_tensors="pt")["input_ids"].cuda()
        t_plain, plain = _timed(lambda ids=ids: generate(model, ids, **kw), args.repeats)
        with apply_dllm_cache(model, config, adapter="llada") as handle:
            t_cached, cached = _timed(
                lambda ids=ids: generate(model, ids, **kw, cache=handle.cache), args.repeats
            )
            handle.cache.stats.clear()
            generate(model, ids, **kw, cache=handle.cache)
            flops_ratio = handle.cache.stats.flops_ratio
        rows.append({
            "prompt_tokens": ids.shape[1],
            "tps_plain_median": gen_length / statistics.median(t_plain),
            "tps_cached_median": gen_length / statistics.median(t_cached),
            "seconds_plain": [min(t_plain), statistics.median(t_plain), max(t_plain)],
            "seconds_cached": [min(t_cached), statistics.median(t_cached), max(t_cached)],
            "speedup_median": statistics.median(t_plain) / statistics.median(t_cached),
            "flops_ratio_blocks": flops_ratio,
            "agreement": float((plain == cached).float().mean()),
            "cached_text": tok.decode(cached[0], skip_special_tokens=True),
        })  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
