"""PrismMuon's optimizer step against Muon's, as ratios measured in one run (issue 28, section 4).

    python packages/prism/benchmarks/bench_optimizer_step.py [--repeats 21] [--inner 5] [--gpt-repeats 2]

Target: PrismMuon step ≤ 1.3× Muon's step on (a) the reproduction's digits MLP (hidden matrices
256×64 and 256×256) and (b) a 12-layer GPT-2-small-shaped set of hidden matrices (per layer 2304×768
qkv, 768×768 attention out, 3072×768 and 768×3072 MLP), CPU float32, one thread.

"Muon" is ``PrismMuon(ns_coefficients=Keller's)``: the same momentum, batching and update code with
the fixed quintic, so the ratio is the orthogonaliser's cost. ``torch.optim.Muon`` (per-matrix, bf16 on
CPU) is timed too on the MLP for reference. Gradients are fixed random tensors; timing is interleaved
(``shared_core.bench.compare``, median of per-pair ratios).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import time

import torch
from prism_matfn.optim import PrismMuon
from prism_matfn.training import MUON_COEFFICIENTS

from shared_core.bench import compare

MLP_SHAPES = [(256, 64), (256, 256)]
GPT2_LAYER = [(2304, 768), (768, 768), (3072, 768), (768, 3072)]


def stepper(make, shapes, inner=1):
    g = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s, generator=g) * 0.02) for s in shapes]
    grads = [torch.randn(s, generator=g) for s in shapes]
    opt = make(params)
    for p, gr in zip(params, grads, strict=True):
        p.grad = gr

    def step():
        for _ in range(inner):
            opt.step()

    return step


def cpu_time_ratio(candidate, baseline, repeats):
    """Median [q25, q75] of per-pair ratios of this thread's CPU time (``time.thread_time``),
    interleaved as ``compare`` does: on a shared box wall-clock is mostly waiting for a core, and one
    torch thread's CPU time is what the step costs."""
    candidate()  # warm-up: optimizer state, sketches
    baseline()
    ratios = []
    for i in range(repeats):
        pair = (candidate, baseline) if i % 2 == 0 else (baseline, candidate)
        spent = {}
        for fn in pair:
            start = time.thread_time()
            fn()
            spent[fn] = time.thread_time() - start
        ratios.append(spent[candidate] / spent[baseline])
    q = statistics.quantiles(ratios, n=4)
    return statistics.median(ratios), q[0], q[2]


def prism(params):
    return PrismMuon(params, lr=0.02)


def muon(params):
    return PrismMuon(params, lr=0.02, ns_coefficients=MUON_COEFFICIENTS)


def torch_muon(params):
    return torch.optim.Muon(params, lr=0.02, weight_decay=0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--inner", type=int, default=5, help="MLP steps per timed sample")
    parser.add_argument("--cases", default="mlp,torch,gpt", help="comma-separated subset")
    parser.add_argument("--cpu-time", action="store_true", help="also the thread-CPU-time ratio")
    parser.add_argument("--gpt-repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--gpt-layers", type=int, default=12, help="GPT-2 small has 12")
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    results = []
    cases = {
        "mlp": ("MLP 256x64 + 256x256", MLP_SHAPES, args.repeats, args.inner, muon,
                "Muon (ns_coefficients)"),
        "torch": ("MLP 256x64 + 256x256", MLP_SHAPES, args.repeats, args.inner, torch_muon,
                  "torch.optim.Muon (bf16)"),
        "gpt": (f"GPT-2-small hidden matrices, {args.gpt_layers} layers",
                GPT2_LAYER * args.gpt_layers, args.gpt_repeats, 1, muon, "Muon (ns_coefficients)"),
    }  # fmt: skip
    for key in args.cases.split(","):
        name, shapes, repeats, inner, base, base_name = cases[key]
        c = compare(stepper(prism, shapes, inner), stepper(base, shapes, inner),
                    name="PrismMuon step", baseline_name=base_name, repeats=repeats,
                    warmup=1)  # fmt: skip
        row = {"case": name, "baseline": base_name, "ratio": c.ratio, "q25": c.ratio_q25,
               "q75": c.ratio_q75, "repeats": repeats, "target": 1.3,
               "held": c.ratio <= 1.3}  # fmt: skip
        if args.cpu_time and repeats > 1:
            cpu = cpu_time_ratio(stepper(prism, shapes, inner), stepper(base, shapes, inner),
                                 repeats)  # fmt: skip
            row["cpu_time_ratio"], row["cpu_q25"], row["cpu_q75"] = cpu
        print(json.dumps(row), flush=True)
        results.append(row)
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes"),
            "machine": platform.processor() or platform.machine(), "threads": args.threads,
            "torch": torch.__version__}  # fmt: skip
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
