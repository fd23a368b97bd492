"""mixfp4: MixFP4 (per-block E2M1 / E1M2 choice inside NVFP4) with NVFP4 and MXFP4 baselines.

Quantizers return a packed container (two 4-bit codes per byte, E4M3 scale bytes with the MixFP4
format flag in bit 7, FP32 tensor scale); ``dequantize`` and ``fake_quantize`` decode it; ``quantize_``
swaps a model's linear layers for packed ones (or QAT ones); ``mixfp4_mm`` multiplies through E2M2
products. The quantizers live in :mod:`mixfp4.quantizers` (not ``mixfp4.quantize``, which is the
function).
"""

from importlib.metadata import PackageNotFoundError, version

from mixfp4 import baselines, formats, layout
from mixfp4.compressed_tensors import load_compressed_tensors, save_compressed_tensors
from mixfp4.datapath import mixfp4_mm
from mixfp4.fake_quant import fake_quantize
from mixfp4.formats import E1M2, E2M1, E2M2, E4M3, FloatFormat
from mixfp4.nn import (
    MixFP4DynamicActivationMixFP4WeightConfig,
    MixFP4Linear,
    MixFP4QATConfig,
    MixFP4QATLinear,
    MixFP4WeightOnlyConfig,
    quantize_,
)
from mixfp4.packed import MX4Packed
from mixfp4.quantizers import (
    SELECTORS,
    dequantize,
    quantize,
    quantize_mixfp4,
    quantize_mxfp4,
    quantize_nvfp4,
)
from mixfp4.serialization import load_packed, load_quantized, save_packed, save_quantized

try:
    __version__ = version("mixfp4")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "E1M2",
    "E2M1",
    "E2M2",
    "E4M3",
    "SELECTORS",
    "FloatFormat",
    "MX4Packed",
    "MixFP4DynamicActivationMixFP4WeightConfig",
    "MixFP4Linear",
    "MixFP4QATConfig",
    "MixFP4QATLinear",
    "MixFP4WeightOnlyConfig",
    "__version__",
    "baselines",
    "dequantize",
    "fake_quantize",
    "formats",
    "layout",
    "load_compressed_tensors",
    "load_packed",
    "load_quantized",
    "mixfp4_mm",
    "quantize",
    "quantize_",
    "quantize_mixfp4",
    "quantize_mxfp4",
    "quantize_nvfp4",
    "save_compressed_tensors",
    "save_packed",
    "save_quantized",
]
