"""Tokens per second of ``generate`` with and without dLLM-Cache on CPU, next to the FLOPs ratio.

    python packages/dllm-cache/benchmarks/bench_cpu.py [--prompt 512 --gen 64 --width 128]
        [--only arms | --only case-d | --only decomposition] [--against-block OLD_BLOCK.py]

A random-init TinyLLaDA (the speed does not depend on the weights), prompt P = 512, response
R = 64 in one block, S = 64 steps, Kp = 100, Kr = 8, ρ = 0.25, one thread. Prints the time ratio
(``shared_core.bench.compare``, interleaved) and the counted-FLOPs ratio from ``CacheStats``.

Second anchor: a Fast-dLLM-style prefix cache. With the response in one block, Fast-dLLM's prefix
KV cache (prompt K/V computed once, every response row recomputed each step) is the same
computation as ``DLLMCacheConfig(prompt_interval=S, response_interval=1, transfer_ratio=0,
refresh_first_layer=False)``, which is what runs here.

Fast-dLLM's decomposition (issue 27 §6): our cache alone, its confidence-threshold parallel
decoding (``threshold=0.9``) alone, and both, each against no cache. The model is
random, so the benchmark scales its weights (``--init-std``) until its logits are peaked
enough for some confidences to pass the threshold; the forward calls per arm are printed.

Old against new hot path: ``--against-block FILE`` loads another version of ``block.py`` (e.g.
``git show REV:packages/dllm-cache/src/dllm_cache/block.py > old.py``) and times the dLLM-Cache
arm with its ``cached_block`` and with the installed one in the same run (interleaved), each also
against no cache, and checks that both generate the same tokens.

Hot path (issue 27 §4): one case-D forward (every layer cached, ``ρ = 0.25``) at two prompt
lengths, ``P`` and ``4 P``, against the full forward at the same lengths: the case-D time
should grow with the recomputed rows (fixed) rather than the sequence length.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys

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
    parser.add_argument("--init-std", type=float, default=0.02)
    parser.add_argument(
        "--only", choices=("arms", "case-d", "decomposition"), help="run only this part"
    )
    parser.add_argument("--against-block", help="time this block.py's cached path against ours")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    config = TinyLLaDAConfig(
        vocab_size=1024,
        d_model=args.width,
        n_heads=4,
        n_layers=args.layers,
        mlp_hidden_size=3 * args.width,
        init_std=args.init_std,
    )
    model = TinyLLaDA(config).eval()
    ids = torch.randint(4, 1024, (1, args.prompt))
    kw = dict(
        mask_id=config.mask_token_id, gen_length=args.gen, block_length=args.gen, steps=args.gen
    )
    if args.against_block:
        print(
            json.dumps(_against_block(model, ids, kw, args.against_block, args.repeats), indent=1)
        )
        return
    if args.only == "case-d":
        print(json.dumps({"case_d": _case_d_scaling(model, args.prompt, args.gen, args.repeats)}))
        return
    if args.only == "decomposition":
        print(json.dumps(_fast_dllm_decomposition(model, ids, kw, args.repeats)))
        return
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
    if args.only == "arms":
        print(json.dumps(results))
        return
    results.update(_fast_dllm_decomposition(model, ids, kw, args.repeats))
    scaling = _case_d_scaling(model, args.prompt, args.gen, args.repeats)
    setting = {"P": args.prompt, "R": args.gen, "width": args.width, "layers": args.layers}
    print(json.dumps({"setting": setting, "arms": results, "case_d": scaling}, indent=1))


def _against_block(model, ids, kw, path, repeats):
    """The dLLM-Cache arm with ``cached_block`` from ``path`` and with ours, in one run."""
    import dllm_cache.cache as cache_module

    spec = importlib.util.spec_from_file_location("_other_block", path)
    other = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = other  # dataclasses look their module up while the file executes
    spec.loader.exec_module(other)
    ours = cache_module.cached_block
    paths = {"new": ours, "old": lambda *a: other.cached_block(*a[:11])}  # old: no tables
    config = DLLMCacheConfig(prompt_interval=100, response_interval=8, transfer_ratio=0.25)

    def cached(name):
        def go():
            cache_module.cached_block = paths[name]
            try:
                with apply_dllm_cache(model, config) as handle:
                    return generate(model, ids, **kw, cache=handle.cache), handle.cache.stats
            finally:
                cache_module.cached_block = ours

        return go

    (new_out, stats), (old_out, _) = cached("new")(), cached("old")()
    out = {"token_identical": bool(torch.equal(new_out, old_out)),
           "counted_flops_ratio": stats.flops_ratio}  # fmt: skip
    cmp = compare(cached("new"), cached("old"), name="new cached path",
                  baseline_name="old cached path", repeats=repeats, warmup=1)  # fmt: skip
    print(cmp)
    out["new_time_over_old"] = cmp.ratio
    for name in ("new", "old"):
        cmp = compare(cached(name), lambda: generate(model, ids, **kw), name=f"{name} cached path",
                      baseline_name="no cache", repeats=repeats, warmup=1)  # fmt: skip
        print(cmp)
        speedup = 1 / cmp.ratio
        out[name] = {"speedup": speedup, "of_flops_ratio": speedup / stats.flops_ratio}
    return out


def _calls(model, fn):
    n = [0]
    hook = model.register_forward_pre_hook(lambda m, a: n.__setitem__(0, n[0] + 1))
    try:
        fn()
    finally:
        hook.remove()
    return n[0]


def _fast_dllm_decomposition(model, ids, kw, repeats):
    """Threshold parallel decoding alone, the cache alone and both, each against no cache."""
    out = {}
    cache_config = DLLMCacheConfig(prompt_interval=100, response_interval=8, transfer_ratio=0.25)
    for name, threshold, use_cache in (
        ("dLLM-Cache alone", None, True),
        ("parallel decoding (threshold 0.9)", 0.9, False),
        ("parallel decoding + dLLM-Cache", 0.9, True),
    ):
        handle = apply_dllm_cache(model, cache_config) if use_cache else None
        extra = {"threshold": threshold, "cache": handle.cache if handle else None}
        try:
            cmp = compare(
                lambda e=extra: generate(model, ids, **kw, **e),
                lambda: generate(model, ids, **kw),
                name=name, baseline_name="no cache", repeats=repeats, warmup=1,
            )  # fmt: skip
            calls = _calls(model, lambda e=extra: generate(model, ids, **kw, **e))
        finally:
            if handle:
                handle.remove()
        print(cmp)
        out[name] = {
            "speedup": 1 / cmp.ratio,
            "forward_calls": calls,
            "uncached_calls": kw["steps"],
        }
    return out


def _case_d_scaling(model, prompt, gen, repeats):
    """Seconds of one case-D forward and of a full forward at P and 4P (same R, ρ = 0.25)."""
    config = DLLMCacheConfig(10_000, 10_000, 0.25, refresh_first_layer=False)
    rows = {}
    # the LM head on the response rows only, as generate runs it: a full-sequence head would
    # grow with P in both arms and is not part of the blocks' cost
    keep = {"logits_to_keep": gen}
    for P in (prompt, 4 * prompt):
        x = torch.cat([torch.randint(4, 1024, (1, P)), torch.full((1, gen), 3)], 1)
        with apply_dllm_cache(model, config) as handle, torch.no_grad():
            cache = handle.cache
            cache.reset(P)
            model(x, **keep)  # step 1: case A fills the cache; every later call is case D

            def full(cache=cache, x=x, P=P):
                cache.prompt_length = None  # inactive for one call: the blocks' own forward
                try:
                    return model(x, **keep)
                finally:
                    cache.prompt_length = P

            cmp = compare(lambda x=x: model(x, **keep), full, name=f"case D P={P}",
                          baseline_name=f"full P={P}", repeats=3 * repeats, warmup=1)  # fmt: skip
            assert cache.stats.records[-1].case == "D"
        print(cmp)
        rows[P] = {"case_d_s": cmp.candidate_s, "full_s": cmp.baseline_s}
    a, b = rows[prompt], rows[4 * prompt]
    return {
        "per_length": rows,
        "case_d_time_ratio_4P_over_P": b["case_d_s"] / a["case_d_s"],
        "full_time_ratio_4P_over_P": b["full_s"] / a["full_s"],
        "sequence_length_ratio": (4 * prompt + gen) / (prompt + gen),
    }


if __name__ == "__main__":
    main()
