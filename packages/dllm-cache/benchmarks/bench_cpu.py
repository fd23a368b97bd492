"""Tokens per second of ``generate`` with and without dLLM-Cache on CPU, next to the FLOPs ratio.

    python packages/dllm-cache/benchmarks/bench_cpu.py [--prompt 512 --gen 64 --width 128]

A random-init TinyLLaDA (the speed does not depend on the weights), prompt P = 512, response
R = 64 in one block, S = 64 steps, Kp = 100, Kr = 8, ρ = 0.25, one thread. Prints the time ratio
(``shared_core.bench.compare``, interleaved) and the counted-FLOPs ratio from ``CacheStats``.

Second anchor: a Fast-dLLM-style prefix cache. With the response in one block, Fast-dLLM's prefix
KV cache (prompt K/V computed once, every response row recomputed each step) is the same
computation as ``DLLMCacheConfig(prompt_interval=S, response_interval=1, transfer_ratio=0,
refresh_first_layer=False)``, which is what runs here.
"""

from __future__ import annotations

import argparse
import json

import torch
from dllm_cache import DLLMCacheConfig, TinyLLaDA, TinyLLaDAConfig, apply_dllm_cache, generate

from shared_core.bench import compare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--gen", type=int, default=64)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    config = TinyLLaDAConfig(
        vocab_size=1024,
        d_model=args.width,
        n_heads=4,
        n_layers=args.layers,
        mlp_hidden_size=3 * args.width,
    )
    model = TinyLLaDA(config).eval()
    ids = torch.randint(4, 1024, (1, args.prompt))
    kw = dict(
        mask_id=config.mask_token_id, gen_length=args.gen, block_length=args.gen, steps=args.gen
    )
    arms = {
        "dLLM-Cache": DLLMCacheConfig(
            prompt_interval=100, response_interval=8, transfer_ratio=0.25
        ),
        # the paper as written: layer 0 is cached like the others
        "dLLM-Cache, layer 0 cached": DLLMCacheConfig(
            prompt_interval=100, response_interval=8, transfer_ratio=0.25, refresh_first_layer=False
        ),
        "prefix cache (Fast-dLLM-style)": DLLMCacheConfig(
            prompt_interval=args.gen,
            response_interval=1,
            transfer_ratio=0.0,
            refresh_first_layer=False,
        ),
    }
    results = {}
    for name, cache_config in arms.items():
        with apply_dllm_cache(model, cache_config) as handle:
            cmp = compare(
                lambda h=handle: generate(model, ids, **kw, cache=h.cache),
                lambda: generate(model, ids, **kw),
                name=name, baseline_name="no cache", repeats=args.repeats, warmup=1,
            )  # fmt: skip
            handle.cache.stats.clear()
            generate(model, ids, **kw, cache=handle.cache)
            flops_ratio = handle.cache.stats.flops_ratio
        print(cmp)
        results[name] = {
            "tokens_per_s_cached": args.gen / cmp.candidate_s, "tokens_per_s_uncached": args.gen / cmp.baseline_s,
            "speedup": 1 / cmp.ratio, "counted_flops_ratio": flops_ratio,
        }  # fmt: skip
    setting = {"P": args.prompt, "R": args.gen, "width": args.width, "layers": args.layers}
    print(json.dumps({"setting": setting, "arms": results}, indent=1))


if __name__ == "__main__":
    main()
