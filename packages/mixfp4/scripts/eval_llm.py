"""W4A4 / W4A16 fake-quant perplexity of a local Hugging Face causal LM: FP / NVFP4 / MixFP4 / MXFP4.

    python packages/mixfp4/scripts/eval_llm.py --model /path/to/llama --text wikitext2_test.txt \
        [--seq-len 2048 --max-windows 64 --mode W4A4 --device cuda --dtype bfloat16]

Nothing is downloaded: ``--model`` is a local folder (``save_pretrained`` layout) and ``--text`` a
local plain-text file (e.g. the WikiText-2 test split joined with blank lines). Every ``nn.Linear``
except ``lm_head`` is quantized; activations are fake-quantized per 16 along K with a dynamic tensor
scale (W4A4) or left alone (W4A16). Prints one line per format and writes ``--out`` as JSON.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

import mixfp4
import torch
from mixfp4.evaluation import keep_lm_head, perplexity


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="local HF model folder")
    parser.add_argument("--text", type=Path, required=True, help="local evaluation text file")
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--max-windows", type=int, default=64)
    parser.add_argument("--mode", choices=("W4A4", "W4A16"), default="W4A4")
    parser.add_argument("--formats", nargs="+", default=["nvfp4", "mixfp4", "mxfp4"])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    parser.add_argument("--out", type=Path, default=Path("eval_llm.json"))
    args = parser.parse_args(argv)

    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=getattr(torch, args.dtype))
    model = model.to(args.device).eval()
    ids = torch.tensor(tokenizer(args.text.read_text())["input_ids"], dtype=torch.long)
    n = min(args.max_windows, ids.numel() // args.seq_len)
    if n < 1:
        raise SystemExit(
            f"{args.text} has {ids.numel()} tokens, fewer than --seq-len {args.seq_len}"
        )
    windows = ids[: n * args.seq_len].reshape(n, args.seq_len)

    results = {"fp": perplexity(model, windows)}
    print(f"fp ({args.dtype}): {results['fp']:.4f}")
    config_cls = (
        mixfp4.MixFP4DynamicActivationMixFP4WeightConfig
        if args.mode == "W4A4"
        else mixfp4.MixFP4WeightOnlyConfig
    )
    for fmt in args.formats:
        quantized = mixfp4.quantize_(copy.deepcopy(model), config_cls(fmt=fmt), keep_lm_head)
        results[fmt] = perplexity(quantized, windows)
        print(f"{fmt} {args.mode}: {results[fmt]:.4f}")
        del quantized
    args.out.write_text(
        json.dumps({"mode": args.mode, "windows": n, "perplexity": results}, indent=2)
    )
    return results


if __name__ == "__main__":
    main()
