"""Reproduce the paper's claims at CPU scale: ``python -m cars_sampling.reproduce [--quick|--full]``.

1. Exactness on an enumerable toy (explicit LM over {a, b, c, EOS}, a regular language of a few
   hundred strings): total variation and KL from each style's samples to the exact constrained
   distribution, against the noise floor of as many i.i.d. exact draws; GCD as a negative control.
2. Efficiency with a neural LM: a tiny Llama trained (shared-core recipe) on the in-repo grammars
   with corrupted strings mixed in, so that part of its mass is invalid, as with the paper's
   prompted LLMs. Valid samples per attempt, LM forward passes per valid sample, diversity, and the
   token positions actually computed with KV-cache reuse.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from cars_sampling.baselines import METHODS, sample_with
from cars_sampling.constraints import DFAConstraint
from cars_sampling.exact import (
    empirical,
    entropy,
    exact_distribution,
    kl_divergence,
    total_variation,
)
from cars_sampling.grammars import GRAMMARS
from cars_sampling.lm import ToyLM
from cars_sampling.sampler import STYLES
from shared_core.cli import ReproduceArgs, progress, reproduce_main
from shared_core.report import Report, subplots

TOY_VOCAB = ["a", "b", "c", None]
TOY_EOS = 3
TOY_REGEX = "a(b|c)*|c(a|b)+"
TOY_MAX_NEW_TOKENS = 7
RUNS = METHODS  # the four styles, then GCD


def _toy_run(seed: int, n: int) -> dict[str, Any]:
    lm = ToyLM(4, TOY_EOS, seed=seed)
    constraint = DFAConstraint.from_regex(TOY_REGEX, TOY_VOCAB, TOY_EOS)
    exact = exact_distribution(lm, constraint, max_new_tokens=TOY_MAX_NEW_TOKENS)
    rng = np.random.default_rng(10_000 + seed)
    floors = [empirical(exact.sample(n, rng)) for _ in range(5)]
    out: dict[str, Any] = {
        "n_strings": len(exact.probs),
        "mass": exact.mass,
        "floor_tv": [total_variation(f, exact.probs) for f in floors],
        "floor_kl": [kl_divergence(f, exact.probs) for f in floors],
        "exact_entropy": entropy(exact.probs),
    }
    for run in RUNS:
        res = sample_with(
            run,
            lm,
            constraint,
            n_samples=n,
            max_attempts=200 * n,
            max_new_tokens=TOY_MAX_NEW_TOKENS,
            seed=seed,
        )
        emp = empirical(res.token_ids)
        out[run] = {
            "tv": total_variation(emp, exact.probs),
            "kl": kl_divergence(emp, exact.probs),
            "acceptance": res.n_valid / res.n_attempts,
            "forward_passes_per_valid": res.n_forward_passes / max(res.n_valid, 1),
            "unique": len(emp),
            "entropy": entropy(emp),
        }
    return out


def exactness(args: ReproduceArgs, report: Report) -> None:
    seeds = list(range(args.pick(smoke=1, quick=3, full=5)))
    n = args.pick(smoke=300, quick=3000, full=10_000)
    runs = [
        report.cached(f"toy-seed{s}-n{n}", lambda s=s: _toy_run(s, n))
        for s in progress(seeds, desc="exactness")
    ]
    rows = []
    for seed, r in zip(seeds, runs, strict=True):
        floor = statistics.mean(r["floor_tv"])
        for run in RUNS:
            m = r[run]
            rows.append(
                {
                    "seed": seed,
                    "style": run,
                    "valid strings": r["n_strings"],
                    "P(L)": r["mass"],
                    "TV": m["tv"],
                    "noise-floor TV": floor,
                    "KL": m["kl"],
                    "noise-floor KL": statistics.mean(r["floor_kl"]),
                    "acceptance": m["acceptance"],
                    "forward passes / valid": m["forward_passes_per_valid"],
                    "unique": m["unique"],
                    "entropy": m["entropy"],
                    "exact entropy": r["exact_entropy"],
                }
            )
    report.table("exactness (toy LM, N samples per style and seed)", rows)
    floor_tv = [t for r in runs for t in r["floor_tv"]]
    floor_mean = statistics.mean(floor_tv)
    floor_sd = statistics.pstdev(floor_tv) if len(floor_tv) > 1 else 0.0
    settings = {
        "N": n,
        "seeds": len(seeds),
        "regex": TOY_REGEX,
        "max_new_tokens": TOY_MAX_NEW_TOKENS,
    }
    for run in STYLES:
        tvs = [r[run]["tv"] for r in runs]
        report.claim(
            f"{run.upper()} is exact (TV at the i.i.d. noise floor)",
            "total variation to P_L",
            statistics.mean(tvs),
            floor_mean,
            direction="lower",
            baseline_name="i.i.d. exact draws",
            tolerance=3 * floor_sd,
            settings=settings,
            note=f"tolerance = 3 sd of the noise floor ({3 * floor_sd:.4f})",
        )
    gcd_tv = statistics.mean(r["gcd"]["tv"] for r in runs)
    report.claim(
        "GCD is biased (negative control)",
        "total variation to P_L",
        gcd_tv,
        floor_mean,
        direction="higher",
        baseline_name="i.i.d. exact draws",
        tolerance=0.0,
        held=gcd_tv > floor_mean + 5 * floor_sd,
        settings=settings,
        note="held when GCD's TV exceeds the floor by more than 5 sd",
    )
    cars_acc = statistics.mean(r["cars"]["acceptance"] for r in runs)
    for base in ("ars", "rs"):
        report.claim(
            f"CARS accepts more often than {base.upper()} (toy)",
            "valid samples / attempt",
            cars_acc,
            statistics.mean(r[base]["acceptance"] for r in runs),
            direction="higher",
            baseline_name=base.upper(),
            settings=settings,
        )


def _neural_lm(args: ReproduceArgs) -> tuple[Any, Any]:
    if args.smoke:  # no training in a smoke run: a random tiny Llama over shared-core's BPE
        from shared_core.data import bpe_tokenizer
        from shared_core.models import tiny_llama

        tok = bpe_tokenizer(512)
        return tiny_llama(
            vocab_size=len(tok), hidden_size=32, num_layers=1, num_heads=2, seed=args.seed
        ), tok
    from cars_sampling.grammar_lm import grammar_lm

    return grammar_lm(steps=args.pick(smoke=1, quick=200, full=400), corruption=0.7, seed=args.seed)


def _neural_run(
    model: Any,
    tok: Any,
    grammar: str,
    run: str,
    n: int,
    attempts: int,
    max_new_tokens: int,
    seed: int,
) -> dict[str, Any]:
    from cars_sampling.transformers_lm import TransformersLM

    g = GRAMMARS[grammar]
    constraint = g.constraint(tok)
    prompt = tok(g.prompt, add_special_tokens=False)["input_ids"]
    lm = TransformersLM(model, tok)
    start = time.perf_counter()
    res = sample_with(
        run,
        lm,
        constraint,
        prompt=prompt,
        n_samples=n,
        max_attempts=attempts,
        max_new_tokens=max_new_tokens,
        seed=seed,
        tokenizer=tok,
    )
    seconds = time.perf_counter() - start
    emp = empirical(res.token_ids)
    # What the official code computes: one prefill of BOS + prompt per attempt, then one
    # position per generated token (HF generate keeps a KV cache only within an attempt).
    official = res.n_attempts * (len(lm.context(prompt))) + res.n_forward_passes
    return {
        "valid": res.n_valid,
        "attempts": res.n_attempts,
        "forward_passes": res.n_forward_passes,
        "tokens_computed": lm.tokens_computed,
        "official_tokens": official,
        "seconds": seconds,
        "unique": len(emp),
        "entropy": entropy(emp) if emp else 0.0,
        "history": [int(a) for a in res.acceptance_history],
    }


def efficiency(args: ReproduceArgs, report: Report) -> None:
    grammars = args.pick(smoke=["bv4"], quick=list(GRAMMARS), full=list(GRAMMARS))
    n = args.pick(smoke=2, quick=50, full=100)
    attempts = args.pick(smoke=10, quick=400, full=2000)
    max_new_tokens = args.pick(smoke=12, quick=48, full=64)
    model, tok = _neural_lm(args)
    results: dict[tuple[str, str], dict[str, Any]] = {}
    jobs = [(g, r) for g in grammars for r in RUNS]
    for g, r in progress(jobs, desc="efficiency"):
        results[(g, r)] = report.cached(
            f"neural-{g}-{r}",
            lambda g=g, r=r: _neural_run(model, tok, g, r, n, attempts, max_new_tokens, args.seed),
        )
    rows = []
    for (g, r), m in results.items():
        rows.append(
            {
                "grammar": g,
                "style": r,
                "valid": m["valid"],
                "attempts": m["attempts"],
                "valid / attempt": m["valid"] / max(m["attempts"], 1),
                "forward passes / valid": m["forward_passes"] / m["valid"]
                if m["valid"]
                else math.inf,
                "computed tokens / valid (KV reuse)": m["tokens_computed"] / m["valid"]
                if m["valid"]
                else math.inf,
                "computed tokens / valid (official)": m["official_tokens"] / m["valid"]
                if m["valid"]
                else math.inf,
                "unique / valid": m["unique"] / max(m["valid"], 1),
                "entropy": m["entropy"],
                "seconds": m["seconds"],
            }
        )
    report.table("efficiency (tiny Llama trained on the grammars)", rows)

    def valid(run: str) -> int:
        return sum(results[(g, run)]["valid"] for g in grammars)

    def pooled(run: str, key: str) -> float:
        n_valid = valid(run)
        return sum(results[(g, run)][key] for g in grammars) / n_valid if n_valid else math.inf

    settings = {
        "grammars": grammars,
        "n_samples": n,
        "max_attempts": attempts,
        "max_new_tokens": max_new_tokens,
    }
    cars_fp = pooled("cars", "forward_passes")
    for base in ("ars", "rs"):
        report.claim(
            f"CARS needs fewer forward passes per valid sample than {base.upper()}",
            "LM forward passes / valid sample (pooled over grammars)",
            cars_fp,
            pooled(base, "forward_passes"),
            direction="lower",
            baseline_name=base.upper(),
            settings=settings,
            samples=min(valid("cars"), valid(base)),  # too few valid samples: n/a, not held
        )
    report.claim(
        "KV-cache reuse computes fewer token positions than the official recomputation",
        "token positions computed / valid sample (CARS)",
        pooled("cars", "tokens_computed"),
        pooled("cars", "official_tokens"),
        direction="lower",
        baseline_name="official (re-prefill every attempt)",
        settings=settings,
        samples=valid("cars"),
    )
    fig, ax = subplots(figsize=(6, 3.5))
    g0 = grammars[0]
    for run in STYLES:
        hist = results[(g0, run)]["history"]
        if hist:
            ax.plot(np.cumsum(hist) / np.arange(1, len(hist) + 1), label=run.upper())
    ax.set_xlabel("attempt")
    ax.set_ylabel("valid / attempt (running)")
    ax.set_title(f"{g0}: acceptance over attempts")
    ax.legend()
    report.figure("acceptance", fig, f"Running acceptance rate on the {g0} grammar")


def run(args: ReproduceArgs) -> Report:
    report = Report(
        "cars-sampling",
        "Constrained Adaptive Rejection Sampling (Parys et al., ICML 2026)",
        args.out,
        {"size": args.size, "seed": args.seed},
    )
    exactness(args, report)
    efficiency(args, report)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    return reproduce_main(run, argv, description=__doc__ or "")


if __name__ == "__main__":
    raise SystemExit(main())
