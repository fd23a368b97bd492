"""One prepared GPU run (about 8 minutes on an H100/H200): measure what the CPU build can only assume.

    python benchmarks/gpu_check.py --out gpu-out [--layers 2] [--quick]

1. **Curves.** For every green-context size from 8 SMs to the whole device (steps of 8), a bf16 GEMM
   (8192 x 8192 x 8192) gives Π(n) and a 1 GiB device copy gives B(n) (bytes read + written). The
   points (running maximum, so noise cannot make them decrease) become a
   :meth:`HardwareProfile.from_measurements` profile (``profile.json``), and the reproduction's main
   case (Qwen3-8B, Mooncake) is rerun on it.
2. **Roofline error.** A random-init Qwen3-8B-wide model of ``--layers`` layers (the reference
   executor) runs prefill-only (1 x 512 .. 1 x 4096 tokens) and decode-only (8 .. 128 requests at
   contexts 512 .. 4096) iterations on the whole device; the roofline on the measured profile,
   scaled to the same layer count, predicts each. Reported: relative errors.
3. **Isolation.** Decode steps (64 requests, context 2048) timed alone, next to a concurrent 4096-token
   prefill on disjoint partitions (decode on a quarter of the SMs), and next to the same prefill on
   one shared stream. The partitions' SM sets are probed for disjointness (pytorch#195378).

Everything lands in ``--out/result.json``; nothing here runs on CPU.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from duetserve import HardwareProfile, ModelShape, RooflineModel, Seq
from duetserve.executor import ReferenceExecutor, TinyQwen3
from duetserve.partition import SMPartitioner


def timed(fn: Any, stream: Any = None, reps: int = 5) -> float:
    """Median seconds of ``fn()`` on ``stream`` (CUDA events)."""
    stream = stream or torch.cuda.current_stream()
    out = []
    with torch.cuda.stream(stream):
        fn()
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(stream)
            fn()
            b.record(stream)
            b.synchronize()
            out.append(a.elapsed_time(b) / 1e3)
    return float(np.median(out))


def measure_curves(part: SMPartitioner, quick: bool) -> dict[str, Any]:
    n = 4096 if quick else 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    src = torch.empty(2**29, device="cuda", dtype=torch.int16)  # 1 GiB
    dst = torch.empty_like(src)
    rows = []
    sizes = list(range(8, part.total_sms + 1, 8))
    if sizes[-1] != part.total_sms:
        sizes.append(part.total_sms)
    for sms in sizes:
        ctx = part._context(sms)
        stream = part._stream(ctx)
        t_mm = timed(lambda: a @ b, stream)
        t_cp = timed(lambda: dst.copy_(src), stream)
        rows.append({"n_sm": sms, "flops": 2 * n**3 / t_mm, "bandwidth": 2 * src.nbytes / t_cp})
    flops = np.maximum.accumulate([r["flops"] for r in rows])
    bw = np.maximum.accumulate([r["bandwidth"] for r in rows])
    return {
        "raw": rows,
        "n_sm": [r["n_sm"] for r in rows],
        "flops": flops.tolist(),
        "bandwidth": bw.tolist(),
        "n_sm_total": part.total_sms,
    }


def roofline_error(profile: HardwareProfile, layers: int) -> list[dict[str, Any]]:
    q8 = ModelShape.qwen3_8b()
    shape = ModelShape(
        n_layers=layers,
        d_model=q8.d_model,
        n_heads=q8.n_heads,
        n_kv_heads=q8.n_kv_heads,
        d_head=q8.d_head,
        d_ff=q8.d_ff,
        vocab=q8.vocab,
        name=f"Qwen3-8B-{layers}L",
    )
    roof = RooflineModel(shape, profile)
    ex = ReferenceExecutor(
        TinyQwen3(shape), max_seqs=128, max_len=4608, device="cuda", dtype=torch.bfloat16
    )
    out = []
    for q in (512, 1024, 2048, 4096):
        tokens = torch.randint(0, shape.vocab, (q,)).tolist()
        t = timed(lambda tokens=tokens: ex.prefill(0, tokens))
        pred = roof.iteration_latency([Seq(0, q)])
        out.append(
            {
                "kind": "prefill",
                "tokens": q,
                "measured_s": t,
                "predicted_s": pred,
                "rel_error": pred / t - 1,
            }
        )
    for n, ctx in ((8, 512), (32, 1024), (64, 2048), (128, 4096)):
        args = {"slots": list(range(n)), "last_tokens": [1] * n, "positions": [ctx] * n, "k": 1}
        t = timed(lambda args=args: ex.decode_window(**args))
        pred = roof.iteration_latency([Seq(ctx)] * n)
        out.append(
            {
                "kind": "decode",
                "requests": n,
                "context": ctx,
                "measured_s": t,
                "predicted_s": pred,
                "rel_error": pred / t - 1,
            }
        )
    return out


def isolation(part: SMPartitioner, layers: int) -> dict[str, Any]:
    q8 = ModelShape.qwen3_8b()
    shape = ModelShape(
        n_layers=layers,
        d_model=q8.d_model,
        n_heads=q8.n_heads,
        n_kv_heads=q8.n_kv_heads,
        d_head=q8.d_head,
        d_ff=q8.d_ff,
        vocab=q8.vocab,
    )
    ex = ReferenceExecutor(
        TinyQwen3(shape), max_seqs=65, max_len=4200, device="cuda", dtype=torch.bfloat16
    )
    window = {"slots": list(range(64)), "last_tokens": [1] * 64, "positions": [2048] * 64, "k": 4}
    prompt = torch.randint(0, shape.vocab, (4096,)).tolist()
    p = part.partition(part.total_sms // 4)
    alone = timed(lambda: ex.decode_window(**window), p.decode_stream)

    def concurrent(shared: bool) -> float:
        s_dec = torch.cuda.current_stream() if shared else p.decode_stream
        s_pre = s_dec if shared else p.prefill_stream
        torch.cuda.synchronize()
        with torch.cuda.stream(s_pre):
            ex.prefill(64, prompt)
        with torch.cuda.stream(s_dec):
            ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            ev0.record(s_dec)
            ex._launch_window(**window)
            ev1.record(s_dec)
        torch.cuda.synchronize()
        return ev0.elapsed_time(ev1) / 1e3

    return {
        "decode_sms": p.decode_sms,
        "prefill_sms": p.prefill_sms,
        "observed_decode_sms": len(p.observed[0]) if p.observed else None,
        "observed_prefill_sms": len(p.observed[1]) if p.observed else None,
        "disjoint": bool(p.observed and not (p.observed[0] & p.observed[1])),
        "decode_window_alone_s": alone,
        "decode_window_next_to_prefill_partitioned_s": float(
            np.median([concurrent(False) for _ in range(5)])
        ),
        "decode_window_behind_prefill_shared_stream_s": float(
            np.median([concurrent(True) for _ in range(5)])
        ),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("gpu-out"))
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="smaller GEMMs, for a first look")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    part = SMPartitioner(strict=False)
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    curves = measure_curves(part, args.quick)
    (args.out / "profile.json").write_text(json.dumps(curves, indent=2))
    profile = HardwareProfile.from_measurements(
        curves,
        n_sm=part.total_sms,
        name="measured",
        sms_per_tpc=2,
        memory_bytes=float(torch.cuda.get_device_properties(0).total_memory),
    )
    result["curves"] = curves
    result["roofline_error"] = roofline_error(profile, args.layers)
    result["isolation"] = isolation(part, args.layers)
    from duetserve.experiments import Slo, slo_rate, unit_trace

    trace = unit_trace("mooncake", 240, 0)
    model = RooflineModel(ModelShape.qwen3_8b(), profile)
    result["slo_rates_on_measured_profile"] = {
        policy: slo_rate(trace, policy, model, Slo()).rate for policy in ("aggregated", "duet")
    }
    (args.out / "result.json").write_text(json.dumps(result, indent=2, default=str))
    print(json.dumps({k: v for k, v in result.items() if k != "curves"}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
