"""One-run benchmark of cars-sampling, reported as ratios (CPU, one thread).

    python packages/cars/benchmarks/bench_cars.py [--fast] [--out bench.json]

1. Forward passes and wall time per valid sample: CARS against ARS and RS (and GCD), on the tiny
   Llama trained on the in-repo grammars (``--fast``: a random tiny Llama, bv4 only).
2. The saving from KV-cache reuse: the same CARS run with ``reuse_kv=True`` against ``False``.
3. Trie memory per node, sparse against dense, at V = 512 (the BPE) and V = 32,000 (a toy LM).
   CARS's wall time per valid sample with cold pure-Python DFA masks, warm ones, and llguidance's.
4. Per-node cost of CARS' bookkeeping (cone + sampling + propagation) against llguidance's mask
   computation alone (what every GCD step pays), and the pure-Python DFA mask against llguidance's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import torch
from cars_sampling import CARSSampler, DFAConstraint, ToyLM, sample_with
from cars_sampling.grammars import GRAMMARS
from cars_sampling.transformers_lm import TransformersLM

from shared_core.bench import compare


def _model(fast: bool) -> tuple[Any, Any]:
    if fast:
        from shared_core.data import bpe_tokenizer
        from shared_core.models import tiny_llama

        tok = bpe_tokenizer(512)
        return tiny_llama(vocab_size=len(tok), seed=0), tok
    from cars_sampling.grammar_lm import grammar_lm

    return grammar_lm(steps=200, corruption=0.7)


def per_valid(model: Any, tok: Any, grammars: list[str], n: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for g in grammars:
        c = GRAMMARS[g].constraint(tok)
        prompt = tok(GRAMMARS[g].prompt, add_special_tokens=False)["input_ids"]

        def run(
            style: str, reuse: bool = True, c=c, prompt=prompt, constraint=None
        ) -> dict[str, float]:
            c = c if constraint is None else constraint
            lm = TransformersLM(model, tok, reuse_kv=reuse)
            start = time.perf_counter()
            res = sample_with(
                style,
                lm,
                c,
                prompt=prompt,
                n_samples=n,
                max_attempts=3000,
                max_new_tokens=48,
                seed=0,
            )
            secs = time.perf_counter() - start
            valid = max(res.n_valid, 1)
            return {
                "valid": res.n_valid,
                "forward_passes_per_valid": res.n_forward_passes / valid,
                "seconds_per_valid": secs / valid,
                "tokens_computed_per_valid": lm.tokens_computed / valid,
            }

        rows: dict[str, Any] = {s: run(s) for s in ("cars", "ars", "rs", "gcd")}
        rows["cars_no_kv_reuse"] = run("cars", reuse=False)
        # Mask cost per valid sample: a fresh pure-Python DFA (cold masks, computed per state on
        # first use), the shared one the runs above warmed, and llguidance's native masks.
        rows["cars_dfa_cold_masks"] = run("cars", constraint=GRAMMARS[g].constraint(tok))
        rows["cars_dfa_warm_masks"] = run("cars")
        try:
            llg = GRAMMARS[g].constraint(tok, backend="llguidance")
            rows["cars_llguidance_masks"] = run("cars", constraint=llg)
        except ImportError:
            rows["cars_llguidance_masks"] = {"skipped": "llguidance not installed"}
        # Wall-time ratios: every run is seeded, so each repeat does the same work; the two
        # sides are interleaved and the ratio of medians is kept (shared_core.bench.compare).
        for base in ("ars", "rs"):
            rows[f"forward_passes_ratio_cars_over_{base}"] = (
                rows["cars"]["forward_passes_per_valid"] / rows[base]["forward_passes_per_valid"]
            )
            rows[f"time_ratio_cars_over_{base}"] = compare(
                lambda: run("cars"),
                lambda base=base: run(base),
                name="cars",
                baseline_name=base,
                repeats=3,
                warmup=0,
            ).ratio
        rows["kv_reuse_time_ratio"] = compare(
            lambda: run("cars"),
            lambda: run("cars", reuse=False),
            name="kv reuse",
            baseline_name="recompute",
            repeats=3,
            warmup=0,
        ).ratio
        rows["kv_reuse_tokens_ratio"] = (
            rows["cars"]["tokens_computed_per_valid"]
            / rows["cars_no_kv_reuse"]["tokens_computed_per_valid"]
        )
        out[g] = rows
    return out


def trie_memory() -> dict[str, Any]:
    out = {}
    for v in (512, 32_000):
        lm = ToyLM(v, 0, seed=0, sharpness=3.0)
        vocab = [None] + [chr(97 + i % 26) * (1 + i // 26) for i in range(v - 1)]
        c = DFAConstraint.from_regex("(ab|c)+a?", vocab, 0)
        per_node = {}
        for sparse in (True, False):
            s = CARSSampler(lm, c, max_new_tokens=8, seed=0, sparse_trie=sparse)
            s.sample(n_samples=10, max_attempts=300)
            per_node["sparse" if sparse else "dense"] = s.stats.trie_bytes / s.stats.trie_nodes
        per_node["ratio_sparse_over_dense"] = per_node["sparse"] / per_node["dense"]
        out[f"V={v}"] = per_node
    return out


def mask_costs(tok: Any) -> dict[str, Any]:
    try:
        from cars_sampling.llguidance_backend import LLGuidanceConstraint
    except ImportError:
        return {"skipped": "llguidance not installed"}
    g = GRAMMARS["sql"]
    llg = LLGuidanceConstraint.from_regex(g.regex, tok)
    prompt_text = "SELECT id, age FROM users WHERE "
    ids = tok(prompt_text, add_special_tokens=False)["input_ids"]

    def at_prefix(constraint: Any, k: int) -> None:
        constraint.reset()
        for t in ids[:k]:
            constraint.advance(t)

    def llg_masks() -> None:
        for k in range(len(ids)):
            at_prefix(llg, k)
            llg.allowed_mask()

    def dfa_masks() -> None:  # a fresh constraint: no cached masks, the cold per-state cost
        dfa = DFAConstraint.from_regex(g.regex, tok)
        for k in range(len(ids)):
            at_prefix(dfa, k)
            dfa.allowed_mask()

    def replay_only() -> None:
        for k in range(len(ids)):
            at_prefix(llg, k)

    cmp_dfa = compare(
        dfa_masks,
        llg_masks,
        name="pure-Python DFA masks (cold)",
        baseline_name="llguidance masks",
        repeats=5,
        warmup=1,
    )
    replay = statistics.median(_times(replay_only, 5))
    llg_time = statistics.median(_times(llg_masks, 5)) - replay
    # CARS bookkeeping per new node: cone, weights, draw and a propagation, with the LM and the
    # constraint costs excluded (a cached toy LM over the same vocabulary).
    lm = ToyLM(len(tok), tok.eos_token_id, seed=0)
    dfa = GRAMMARS["sql"].constraint(tok)
    sampler = CARSSampler(lm, dfa, max_new_tokens=48, seed=0)
    sampler.sample(n_samples=20, max_attempts=3000)  # warm the LM memo and the DFA masks
    sampler2 = CARSSampler(lm, dfa, max_new_tokens=48, seed=0)
    start = time.perf_counter()
    sampler2.sample(n_samples=20, max_attempts=3000)
    per_node = (time.perf_counter() - start) / sampler2.stats.trie_nodes
    return {
        "dfa_cold_over_llguidance": cmp_dfa.ratio,
        "llguidance_mask_seconds": llg_time / len(ids),
        "cars_bookkeeping_seconds_per_node": per_node,
        "cars_bookkeeping_over_llguidance_mask": per_node / (llg_time / len(ids)),
    }


def _times(fn: Any, n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fast", action="store_true", help="random tiny Llama, bv4 only")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model, tok = _model(args.fast)
    results = {
        "per_valid": per_valid(
            model, tok, ["bv4"] if args.fast else ["bv4", "slia"], n=5 if args.fast else 30
        ),
        "trie_memory": trie_memory(),
        "mask_costs": mask_costs(tok),
    }
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
