"""GPU benchmark: the fused triton MixFP4 / NVFP4 quantizer against torchao's triton NVFP4 kernel.

    python packages/mixfp4/benchmarks/bench_gpu.py [--rows 8192 --cols 8192]

Needs a CUDA device (torchao's ``triton_quantize_nvfp4`` may further need a recent GPU; it is skipped
with a message when it fails). Prints ``shared_core.bench.compare`` ratios and checks bit parity of the
fused kernel with the torch reference on the same tensor first.
"""

from __future__ import annotations

import argparse
import datetime

import mixfp4
import torch

from shared_core.bench import compare


def peak_memory(w: torch.Tensor) -> None:
    """Peak extra CUDA memory of each path, as a multiple of the input's bytes (target <= 3x)."""
    size = w.numel() * w.element_size()
    a = mixfp4.quantize_mixfp4(w[:512])
    b = mixfp4.quantize_mixfp4(w[:512])
    calls = {
        "quantize_mixfp4 triton": lambda: mixfp4.quantize_mixfp4(w, backend="triton"),
        "quantize_mixfp4 torch": lambda: mixfp4.quantize_mixfp4(w, backend="torch"),
        "mixfp4_mm 512x512": lambda: mixfp4.mixfp4_mm(a, b),
    }
    for name, fn in calls.items():
        fn()
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        fn()
        torch.cuda.synchronize()
        extra = torch.cuda.max_memory_allocated() - base
        ref = size if "quantize" in name else 2 * 512 * w.shape[1] * 4
        print(f"{name}: peak extra {extra / 2**20:.1f} MiB = {extra / ref:.2f}x its input")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--cols", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_gpu.py needs a CUDA device")
    w = torch.randn(args.rows, args.cols, device="cuda", dtype=torch.bfloat16)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"{now}: weight {tuple(w.shape)} bf16 on {torch.cuda.get_device_name()}")
    peak_memory(w)

    small = w[:256]
    same = mixfp4.quantize_mixfp4(small, backend="triton").equal(
        mixfp4.quantize_mixfp4(small, backend="torch")
    )
    print(f"fused kernel bit-identical to the torch reference on 256 rows: {same}")

    print(
        compare(
            lambda: mixfp4.quantize_mixfp4(w, backend="triton"),
            lambda: mixfp4.quantize_mixfp4(w, backend="torch"),
            name="fused triton MixFP4",
            baseline_name="torch reference MixFP4",
            repeats=args.repeats,
        )
    )
    print(
        compare(
            lambda: mixfp4.quantize_mixfp4(w, backend="triton"),
            lambda: mixfp4.quantize_nvfp4(w, backend="triton"),
            name="fused triton MixFP4",
            baseline_name="fused triton NVFP4",
            repeats=args.repeats,
        )
    )
    try:
        from torchao.prototype.mx_formats.kernels import triton_quantize_nvfp4
        from torchao.prototype.mx_formats.nvfp4_tensor import per_tensor_amax_to_scale

        s_t = per_tensor_amax_to_scale(w.abs().amax())
        triton_quantize_nvfp4(w, s_t)
    except Exception as exc:  # torchao missing, or its kernel unsupported on this GPU
        print(f"torchao triton_quantize_nvfp4 unavailable here: {exc!r}")
        return
    print(
        compare(
            lambda: mixfp4.quantize_nvfp4(w, backend="triton"),
            lambda: triton_quantize_nvfp4(w, s_t),
            name="fused triton NVFP4 (ours)",
            baseline_name="torchao triton_quantize_nvfp4",
            repeats=args.repeats,
        )
    )


if __name__ == "__main__":
    main()
