"""Peak extra memory of the quantizer, the decoder and ``mixfp4_mm``, as a multiple of the input.

    python packages/mixfp4/benchmarks/bench_memory.py [--rows 4096 --cols 4096 --mm 512 512 2048]

Target (issue #29): peak extra memory <= 3x the input. torch's CPU allocator is invisible to
``tracemalloc``, so each measurement runs in a fresh process: the input (and, for the decoder and
the GEMM, the packed operands) is allocated and touched first, then the call's extra memory is the
peak resident set after it (``VmHWM``) minus the resident set just before it (``VmRSS``, not the
earlier high-water mark, which set-up temporaries may have raised: that would hide part of the
call's peak). ``quantize2d`` is the quantizer with 2-D 16×16 blocks. "Input" is the weight in its own dtype (float32 or bfloat16) for the quantizer, the
decoded output for the decoder, and the two float32 operands for the GEMM. On a GPU,
``bench_gpu.py`` reports ``torch.cuda.max_memory_allocated`` for the same calls.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

TARGET = 3.0

_CHILD = r"""
import json, sys, torch, mixfp4
torch.set_num_threads(1)

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024

kind, dtype, dims = sys.argv[1], getattr(torch, sys.argv[2]), [int(d) for d in sys.argv[3:]]
g = torch.Generator().manual_seed(0)
if kind in ("quantize", "quantize2d", "dequantize"):
    x = torch.randn(*dims, generator=g).to(dtype)
    mixfp4.dequantize(mixfp4.quantize_mixfp4(x[:16]), dtype)  # warm up lazily built tables
    if kind.startswith("quantize"):
        base, size = status("VmRSS"), x.numel() * x.element_size()
        mixfp4.quantize_mixfp4(x, block_2d=kind == "quantize2d")
    else:
        packed = mixfp4.quantize_mixfp4(x)
        del x
        base, size = status("VmRSS"), packed.codes.numel() * 2 * dtype.itemsize
        mixfp4.dequantize(packed, dtype)
else:
    m, n, k = dims
    a = torch.randn(m, k, generator=g)
    b = torch.randn(n, k, generator=g)
    pa, pb = mixfp4.quantize_mixfp4(a), mixfp4.quantize_mixfp4(b)
    mixfp4.mixfp4_mm(mixfp4.quantize_mixfp4(a[:2]), mixfp4.quantize_mixfp4(b[:2]))
    base, size = status("VmRSS"), (a.numel() + b.numel()) * 4
    mixfp4.mixfp4_mm(pa, pb)
print(json.dumps({"extra": status("VmHWM") - base, "input": size}))
"""


def measure(kind: str, dims: list[int], dtype: str = "float32") -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, kind, dtype, *map(str, dims)],
        check=True,
        capture_output=True,
        text=True,
    )
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["ratio"] = row["extra"] / row["input"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--mm", type=int, nargs=3, default=[512, 512, 2048])
    args = parser.parse_args()
    weight = [args.rows, args.cols]
    rows = [
        ("quantize", weight, "float32"),
        ("quantize", weight, "bfloat16"),
        ("quantize2d", weight, "float32"),
        ("quantize2d", weight, "bfloat16"),
        ("dequantize", weight, "float32"),
        ("dequantize", weight, "bfloat16"),
        ("mixfp4_mm", args.mm, "float32"),
    ]
    for kind, dims, dtype in rows:
        r = measure(kind, dims, dtype)
        verdict = "met" if r["ratio"] <= TARGET else "MISSED"
        print(
            f"{kind} {tuple(dims)} {dtype}: input {r['input'] / 2**20:.1f} MiB, peak extra "
            f"{r['extra'] / 2**20:.1f} MiB = {r['ratio']:.2f}x (target <= {TARGET}x: {verdict})"
        )


if __name__ == "__main__":
    main()
