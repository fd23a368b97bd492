"""``step()`` time of AdaS against torch.optim.AdamW on a ~10M-parameter model, ratios in one run.

    python packages/adas-optim/benchmarks/bench_step.py [--device cuda] [--repeats 15]

Targets (issue 14): AdaS / AdamW(foreach=False) <= 1.5 and AdaS / AdamW(foreach=True) <= 2. Equal
conditions: same parameters, same fixed gradients, float32, same lr and weight decay, each optimizer
on its own copy of the parameters; timings interleaved (shared_core.bench.compare), median ratio.
On CUDA it also checks that an AdaS step makes no host synchronisation
(``torch.cuda.set_sync_debug_mode("error")``).
"""

from __future__ import annotations

import argparse
import json

import torch
from adas_optim import AdaS

from shared_core.bench import compare


def model_params(device: str) -> list[torch.Tensor]:
    """Ten 1024x1024 matrices with biases and a 1-D norm scale each: 10.5M parameters in 30 tensors."""
    g = torch.Generator().manual_seed(0)
    shapes = [(1024, 1024), (1024,), (1024,)] * 10
    return [torch.randn(s, generator=g).to(device) * 0.02 for s in shapes]


def stepper(factory, base: list[torch.Tensor], grads: list[torch.Tensor]):
    params = [torch.nn.Parameter(p.clone()) for p in base]
    for p, g in zip(params, grads, strict=True):
        p.grad = g.clone()
    opt = factory(params)
    return opt.step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    base = model_params(args.device)
    grads = [torch.randn_like(p) * 1e-3 for p in base]
    n = sum(p.numel() for p in base)
    hyper = dict(lr=1e-3, weight_decay=0.01)
    candidates = {
        "AdaS(foreach=True)": lambda ps: AdaS(ps, gamma=1.0, foreach=True, **hyper),
        "AdaS(foreach=False)": lambda ps: AdaS(ps, gamma=1.0, foreach=False, **hyper),
    }
    baselines = {
        "AdamW(foreach=False)": lambda ps: torch.optim.AdamW(ps, foreach=False, **hyper),
        "AdamW(foreach=True)": lambda ps: torch.optim.AdamW(ps, foreach=True, **hyper),
    }
    rows = []
    for cname, cf in candidates.items():
        for bname, bf in baselines.items():
            c = compare(
                stepper(cf, base, grads),
                stepper(bf, base, grads),
                name=cname,
                baseline_name=bname,
                repeats=args.repeats,
            )
            print(c, flush=True)
            rows.append(c.as_row())
    if args.device.startswith("cuda"):
        step = stepper(candidates["AdaS(foreach=True)"], base, grads)
        step()
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        step()  # raises on any host synchronisation
        torch.cuda.set_sync_debug_mode(0)
        print("AdaS(foreach=True) step: no host synchronisation")
    print(json.dumps({"device": args.device, "parameters": n, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
