"""Peak extra memory of the quantizer (float32 and bfloat16), the decoder and the GEMM stays under
3x the input (issue #29, section 4)."""

import importlib.util
from pathlib import Path

import pytest

_BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_memory.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_memory", _BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "dims", "dtype"),
    [
        ("quantize", [2048, 2048], "float32"),
        ("quantize", [2048, 2048], "bfloat16"),
        ("quantize2d", [2048, 2048], "bfloat16"),
        ("dequantize", [2048, 2048], "float32"),
        ("mixfp4_mm", [256, 256, 2048], "float32"),
    ],
)
def test_peak_extra_memory_is_at_most_three_times_the_input(kind, dims, dtype):
    bench = _bench()
    row = bench.measure(kind, dims, dtype)
    assert row["ratio"] <= bench.TARGET, row
