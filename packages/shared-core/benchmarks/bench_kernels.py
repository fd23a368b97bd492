"""Triton kernels against their torch references, as ratios measured in one run.

    python packages/shared-core/benchmarks/bench_kernels.py            # needs a CUDA GPU
    TRITON_INTERPRET=1 python ... --smoke                               # CPU: checks the script runs

Below 1 means the kernel is faster than the reference. Not run yet on a GPU: no GPU was lent to the
session that wrote it; record figures in the README with the date and the card when one is.
"""

from __future__ import annotations

import argparse
import sys

import torch

from shared_core.bench import compare
from shared_core.kernels import block_absmax, gram, row_cosine, triton_enabled


def cases(smoke: bool, device: str, dtype: torch.dtype) -> list[tuple[str, object, tuple]]:
    g = torch.Generator(device=device).manual_seed(0)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g, device=device, dtype=dtype)

    if smoke:
        return [
            ("gram 64x48", gram, (randn(64, 48),)),
            ("block_absmax 64x256/16", block_absmax, (randn(64, 256), 16)),
            ("row_cosine 64x128", row_cosine, (randn(64, 128), randn(64, 128))),
        ]
    return [
        ("gram 4096x1024", gram, (randn(4096, 1024),)),
        ("gram 8x1024x4096", gram, (randn(8, 1024, 4096),)),
        ("block_absmax 8192x8192/16", block_absmax, (randn(8192, 8192), 16)),
        ("block_absmax 8192x8192/32", block_absmax, (randn(8192, 8192), 32)),
        ("row_cosine 8x4096x4096", row_cosine, (randn(8, 4096, 4096), randn(8, 4096, 4096))),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny shapes, a couple of repeats")
    parser.add_argument("--dtype", default="float16", choices=["float32", "float16", "bfloat16"])
    args = parser.parse_args(argv)
    if not triton_enabled():
        print("triton cannot launch here: run on a CUDA GPU, or with TRITON_INTERPRET=1 --smoke")
        return 1
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = getattr(torch, args.dtype)
    repeats = 2 if args.smoke else 30
    print(
        f"device={device} ({torch.cuda.get_device_name() if device == 'cuda' else 'interpreter'}) "
        f"dtype={args.dtype} torch={torch.__version__}"
    )
    for name, op, inputs in cases(args.smoke, device, dtype):
        result = compare(
            lambda op=op, inputs=inputs: op(*inputs, backend="triton"),
            lambda op=op, inputs=inputs: op(*inputs, backend="torch"),
            name=f"triton {name}",
            baseline_name="torch reference",
            repeats=repeats,
            warmup=1 if args.smoke else 3,
        )
        print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
