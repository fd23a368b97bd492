"""LLaDA-8B-Instruct with the paper's settings, where the weights and a GPU exist (not run here).

    python packages/dllm-cache/benchmarks/llada_gpu.py --model GSAI-ML/LLaDA-8B-Instruct \
        --preset llada-instruct-gsm8k --prompts prompts.txt

Loads the checkpoint with ``trust_remote_code`` in bfloat16, runs each prompt (one per line of
``--prompts``, chat template applied) without and with dLLM-Cache at a preset of
``dllm_cache.PRESETS``, and prints tokens per second, the counted-FLOPs ratio of the blocks and the
token agreement of the cached output with the uncached one. Exits with a message when no CUDA
device or no weights are available.
"""

from __future__ import annotations

import argparse
import json
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="GSAI-ML/LLaDA-8B-Instruct")
    parser.add_argument("--preset", default="llada-instruct-gsm8k", choices=sorted(PRESETS))
    parser.add_argument("--prompts", help="a text file, one prompt per line")
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
    gen_length, steps, block_length, config = PRESETS[args.preset]
    texts = Path(args.prompts).read_text().splitlines() if args.prompts else DEFAULT_PROMPTS
    kw = dict(mask_id=LLADA_MASK_ID, gen_length=gen_length, steps=steps, block_length=block_length)
    rows = []
    for text in texts:
        chat = tok.apply_chat_template(
            [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
        )
        ids = tok(chat, return_tensors="pt")["input_ids"].cuda()
        torch.cuda.synchronize()
        start = time.perf_counter()
        plain = generate(model, ids, **kw)
        torch.cuda.synchronize()
        t_plain = time.perf_counter() - start
        with apply_dllm_cache(model, config, adapter="llada") as handle:
            start = time.perf_counter()
            cached = generate(model, ids, **kw, cache=handle.cache)
            torch.cuda.synchronize()
            t_cached = time.perf_counter() - start
            flops_ratio = handle.cache.stats.flops_ratio
        rows.append({
            "prompt_tokens": ids.shape[1], "tps_plain": gen_length / t_plain, "tps_cached": gen_length / t_cached,
            "speedup": t_plain / t_cached, "flops_ratio_blocks": flops_ratio,
            "agreement": float((plain == cached).float().mean()),
            "cached_text": tok.decode(cached[0], skip_special_tokens=True),
        })  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
