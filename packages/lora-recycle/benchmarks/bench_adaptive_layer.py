"""Forward+backward of one adaptive merge layer against peft with K active adapters and against ΔW recompute.

    python packages/lora-recycle/benchmarks/bench_adaptive_layer.py [--k 30] [--rank 16] [--dim 1024]
        [--tokens 2048] [--repeats 15] [--threads 1] [--device cpu|cuda] [--backend auto|torch|triton]
        [--dtype float32|bfloat16] [--json FILE]

Equal conditions: the same base weight, the same K factor pairs and scalings, the same input (which
requires grad, as inside a network). Ours trains the K coefficients; the ΔW arm computes
ΔW = B_cat diag(m) A_cat every step and applies ``x (W + ΔW)ᵀ`` (the same coefficients trained);
peft holds the K adapters active at once (``set_adapter([...])``) with frozen factors, so its
backward only reaches the input (less work than ours). Ratios are interleaved medians in one run
(``shared_core.bench.compare``); below 1 means ours is faster.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import torch
from lora_recycle import (
    AdaptiveMergeConfig,
    LoraExpert,
    LoraPool,
    get_adaptive_merge_model,
    to_peft_model,
)

from shared_core.bench import compare


class One(torch.nn.Module):
    def __init__(self, d_out: int, d_in: int) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(d_in, d_out, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


def build(
    k: int,
    rank: int,
    d_out: int,
    d_in: int,
    device: str,
    dtype: torch.dtype,
    backend: str,
    seed: int = 0,
):  # type: ignore[no-untyped-def]
    g = torch.Generator().manual_seed(seed)
    experts = [
        LoraExpert(
            f"e{i}",
            {
                "proj": (
                    torch.randn(rank, d_in, generator=g) / d_in**0.5,
                    torch.randn(d_out, rank, generator=g) / rank**0.5,
                )
            },
            2.0,
        )
        for i in range(k)
    ]
    torch.manual_seed(seed)
    base = One(d_out, d_in)
    pool = LoraPool.from_experts(experts, base)
    ours = get_adaptive_merge_model(
        One(d_out, d_in).to(dtype=dtype),
        pool,
        AdaptiveMergeConfig(activation="identity", init="ones", backend=backend),
    )
    ours.base_model.proj.base.weight.data.copy_(base.proj.weight.data)
    ours = ours.to(device=device, dtype=dtype)
    peft = to_peft_model(One(d_out, d_in), experts)
    peft.base_model.model.proj.base_layer.weight.data.copy_(base.proj.weight.data)
    peft.base_model.set_adapter([f"e{i}" for i in range(k)])
    for p in peft.parameters():
        p.requires_grad_(False)
    peft = peft.to(device=device, dtype=dtype)
    layer = ours.base_model.proj
    return ours, peft, layer


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--k", type=int, default=30)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--dim", type=int, default=1024, help="in = out features")
    parser.add_argument("--shape", default=None, help="OUTxIN, e.g. 14336x4096 (overrides --dim)")
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--backend", default="torch")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    d_out, d_in = map(int, args.shape.split("x")) if args.shape else (args.dim, args.dim)
    ours, peft, layer = build(args.k, args.rank, d_out, d_in, args.device, dtype, args.backend)
    x = torch.randn(args.tokens, d_in, device=args.device, dtype=dtype, requires_grad=True)

    def step_ours() -> None:
        ours(x).sum().backward()

    def step_peft() -> None:
        peft(x).sum().backward()

    def step_delta() -> None:
        m = layer.row_coefficients().to(dtype)
        delta = layer.lora_B @ (m[:, None] * layer.lora_A)
        torch.nn.functional.linear(x, layer.base.weight + delta).sum().backward()

    with torch.no_grad():  # the three compute the same function
        ref = peft(x)
        torch.testing.assert_close(ours(x), ref, atol=1e-3, rtol=1e-3)
    rows = [
        compare(
            step_ours,
            step_peft,
            name="adaptive layer",
            baseline_name=f"peft, {args.k} active adapters",
            repeats=args.repeats,
        ),
        compare(
            step_ours,
            step_delta,
            name="adaptive layer",
            baseline_name="recompute ΔW = B diag(m) A each step",
            repeats=args.repeats,
        ),
    ]
    for row in rows:
        print(row, f"-> speed-up {1 / row.ratio:.2f}x")
    if args.json:
        record = {
            "date": time.strftime("%Y-%m-%d"),
            "machine": platform.processor() or platform.machine(),
            "device": args.device if args.device == "cpu" else torch.cuda.get_device_name(),
            "settings": vars(args),
            "comparisons": [r.as_row() for r in rows],
        }
        with open(args.json, "w") as f:
            json.dump(record, f, indent=2)


if __name__ == "__main__":
    main()
