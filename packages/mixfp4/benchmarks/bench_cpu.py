"""CPU benchmark in one run: MixFP4 vs NVFP4 quantize time, our NVFP4 vs torchao's, dequantize speed.

    python packages/mixfp4/benchmarks/bench_cpu.py [--rows 4096 --cols 4096 --repeats 5]

Prints ratios from ``shared_core.bench.compare`` (candidate time / baseline time, interleaved runs) and
the dequantize throughput. One torch thread, as the spec asks (two busy cores slow everything down).
"""

from __future__ import annotations

import argparse
import importlib.util
import time

import mixfp4
import torch

from shared_core.bench import compare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    w = torch.randn(args.rows, args.cols, generator=torch.Generator().manual_seed(0))
    print(f"weight {tuple(w.shape)} float32, torch {torch.__version__}, 1 thread")

    mix_vs_nv = compare(
        lambda: mixfp4.quantize_mixfp4(w, backend="torch"),
        lambda: mixfp4.quantize_nvfp4(w, backend="torch"),
        name="quantize_mixfp4",
        baseline_name="quantize_nvfp4",
        repeats=args.repeats,
        warmup=1,
    )
    print(mix_vs_nv)

    if importlib.util.find_spec("torchao") is not None:
        from torchao.prototype.mx_formats.nvfp4_tensor import (
            nvfp4_quantize,
            per_tensor_amax_to_scale,
        )

        def torchao_nvfp4() -> None:
            nvfp4_quantize(w, 16, per_tensor_amax_to_scale(w.abs().amax()))

        print(
            compare(
                lambda: mixfp4.quantize_nvfp4(w, scale_min="normal", backend="torch"),
                torchao_nvfp4,
                name="mixfp4.quantize_nvfp4",
                baseline_name="torchao nvfp4_quantize",
                repeats=args.repeats,
                warmup=1,
            )
        )
    else:
        print("torchao not installed: skipped the torchao comparison")

    packed = mixfp4.quantize_mixfp4(w)
    mixfp4.dequantize(packed)
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        mixfp4.dequantize(packed)
        times.append(time.perf_counter() - start)
    best = sorted(times)[len(times) // 2]
    out_bytes = w.numel() * 4
    print(
        f"dequantize MixFP4 -> float32: {out_bytes / best / 1e9:.2f} GB/s written (median of {args.repeats})"
    )


if __name__ == "__main__":
    main()
