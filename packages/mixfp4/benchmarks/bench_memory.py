"""Peak extra memory of the reference quantizer and of ``mixfp4_mm``, as a multiple of the input.

    python packages/mixfp4/benchmarks/bench_memory.py [--rows 4096 --cols 4096 --mm 512 512 2048]

Target (issue #29): peak extra memory <= 3x the input. torch's CPU allocator is invisible to
``tracemalloc``, so each measurement runs in a fresh process and reads the peak resident set
(``VmHWM``) before and after the call: the input (and, for the GEMM, the packed operands) is
allocated and touched first, so the high-water mark then only moves by what the call adds. "Input" is
the float32 tensor for the quantizer and the two float32 operands for the GEMM. On a GPU,
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

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) * 1024

kind, dims = sys.argv[1], [int(d) for d in sys.argv[2:]]
g = torch.Generator().manual_seed(0)
if kind == "quantize":
    x = torch.randn(*dims, generator=g)
    mixfp4.quantize_mixfp4(x[:16])  # warm up lazily built tables
    base, size = hwm(), x.numel() * 4
    mixfp4.quantize_mixfp4(x)
else:
    m, n, k = dims
    a = torch.randn(m, k, generator=g)
    b = torch.randn(n, k, generator=g)
    pa, pb = mixfp4.quantize_mixfp4(a), mixfp4.quantize_mixfp4(b)
    mixfp4.mixfp4_mm(mixfp4.quantize_mixfp4(a[:2]), mixfp4.quantize_mixfp4(b[:2]))
    base, size = hwm(), (a.numel() + b.numel()) * 4
    mixfp4.mixfp4_mm(pa, pb)
print(json.dumps({"extra": hwm() - base, "input": size}))
"""


def measure(kind: str, dims: list[int]) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, kind, *map(str, dims)],
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
    for kind, dims in (("quantize", [args.rows, args.cols]), ("mixfp4_mm", args.mm)):
        r = measure(kind, dims)
        verdict = "met" if r["ratio"] <= TARGET else "MISSED"
        print(
            f"{kind} {tuple(dims)}: input {r['input'] / 2**20:.1f} MiB, peak extra "
            f"{r['extra'] / 2**20:.1f} MiB = {r['ratio']:.2f}x (target <= {TARGET}x: {verdict})"
        )


if __name__ == "__main__":
    main()
