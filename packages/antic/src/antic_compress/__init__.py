"""antic-compress: ANTIC in-situ neural compression of simulation time series.

A physics-aware temporal selector decides which frames to keep; a neural field (MLP+) compresses
each kept frame, continually fine-tuned with LoRA deltas between keyframes.
"""

from importlib.metadata import PackageNotFoundError, version

from antic_compress.compressor import NeuralFieldCompressor
from antic_compress.data import Vorticity2D, grid_coords, kdv_soliton, kolmogorov_flow
from antic_compress.fields import MLP, SIREN, LoRALinear, MLPPlus, add_lora, remove_lora
from antic_compress.normalizers import MinMaxNormalizer, WelfordNormalizer
from antic_compress.selectors import (
    EnstrophySelector,
    QuantileActivitySelector,
    SurgeSelector,
    TemporalSelector,
    UniformSelector,
    pearson,
)
from antic_compress.store import SnapshotRecord, SnapshotStore
from antic_compress.streaming import ANTIC, rel_l2

try:
    __version__ = version("antic-compress")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "ANTIC",
    "MLP",
    "SIREN",
    "EnstrophySelector",
    "LoRALinear",
    "MLPPlus",
    "MinMaxNormalizer",
    "NeuralFieldCompressor",
    "QuantileActivitySelector",
    "SnapshotRecord",
    "SnapshotStore",
    "SurgeSelector",
    "TemporalSelector",
    "UniformSelector",
    "Vorticity2D",
    "WelfordNormalizer",
    "__version__",
    "add_lora",
    "grid_coords",
    "kdv_soliton",
    "kolmogorov_flow",
    "pearson",
    "rel_l2",
    "remove_lora",
]
