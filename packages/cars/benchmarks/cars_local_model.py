"""The paper's settings on a local Hugging Face model (GPU recommended). Not run in CI or here.

    python packages/cars/benchmarks/cars_local_model.py --model /path/to/Llama-3.1-8B-Instruct \\
        [--grammar bv4|slia|json|sql|FILE.lark] [--styles cars,ars,rsft,rs,gcd] [--out result.json]

Defaults follow the official ``run_task.py``: up to 2000 attempts, stop at 100 valid samples,
``max_new_tokens=512``, bf16 weights, temperature 1, no top-k/top-p, the chat template applied to
the prompt for instruct models. Grammars go through llguidance (Lark) when it is installed, else the
pure-Python DFA. Prints, per style: valid/attempt, forward passes per valid sample, computed token
positions (KV reuse), unique samples and wall time. Nothing is downloaded: ``--model`` must be a
local folder.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from cars_sampling import empirical, entropy, sample_with
from cars_sampling.grammars import GRAMMARS
from cars_sampling.transformers_lm import TransformersLM, chat_prompt_ids, stop_token_ids


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True, help="local Hugging Face model folder")
    parser.add_argument("--grammar", default="bv4", help="a name in GRAMMARS or a .lark file")
    parser.add_argument("--prompt", default=None, help="task prompt (default: the grammar's)")
    parser.add_argument("--styles", default="cars,ars,rsft,rs,gcd")
    parser.add_argument("--n-samples", type=int, default=100)
    parser.add_argument("--max-attempts", type=int, default=2000)
    parser.add_argument("--max-new-tokens", type=int, default=512)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if not Path(args.model).is_dir():
        raise SystemExit(f"--model must be a local folder, got {args.model!r}")

    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype).to(device)
    # The full stop-token set: the tokenizer's EOS and the generation config's (chat EOS ids).
    eos = stop_token_ids(model, tok)
    lm = TransformersLM(model, tok)

    if args.grammar in GRAMMARS:
        g = GRAMMARS[args.grammar]
        try:
            constraint = g.constraint(
                tok, backend="llguidance", eos_token_ids=sorted(eos), vocab_size=lm.vocab_size
            )
        except ImportError:
            constraint = g.constraint(tok, eos_token_ids=sorted(eos), vocab_size=lm.vocab_size)
        task = args.prompt or g.prompt
    else:
        from cars_sampling.llguidance_backend import LLGuidanceConstraint

        constraint = LLGuidanceConstraint.from_grammar(
            Path(args.grammar).read_text(), tok, eos_token_ids=sorted(eos), vocab_size=lm.vocab_size
        )
        task = args.prompt or "Write a program in the given grammar."
    prompt = chat_prompt_ids(tok, task)

    results = {}
    for style in args.styles.split(","):
        lm.clear_cache()
        lm.tokens_computed = 0
        start = time.perf_counter()
        res = sample_with(
            style,
            lm,
            constraint,
            prompt=prompt,
            n_samples=args.n_samples,
            max_attempts=args.max_attempts,
            max_new_tokens=args.max_new_tokens,
            seed=0,
            tokenizer=tok,
        )
        emp = empirical(res.token_ids)
        results[style] = {
            "valid": res.n_valid,
            "attempts": res.n_attempts,
            "valid_per_attempt": res.n_valid / max(res.n_attempts, 1),
            "forward_passes_per_valid": res.n_forward_passes / max(res.n_valid, 1),
            "tokens_computed": lm.tokens_computed,
            "unique": len(emp),
            "entropy": entropy(emp) if emp else 0.0,
            "seconds": time.perf_counter() - start,
            "examples": res.texts[:3],
        }
        print(style, json.dumps(results[style]))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
