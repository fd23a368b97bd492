"""lora-recycle: adaptive merging of recycled LoRAs, with expert selection and task-vector baselines.

Liu et al., "The Appeal and Reality of Recycling LoRAs with Adaptive Merging", ICML 2026.
"""

from importlib.metadata import PackageNotFoundError, version

from lora_recycle import presets
from lora_recycle.adapters import LoraExpert
from lora_recycle.arrow import get_arrow_model
from lora_recycle.controls import reinit_experts
from lora_recycle.errors import (
    AdapterError,
    IncompatibleAdapterError,
    NonFiniteAdapterError,
    UnsupportedAdapterError,
)
from lora_recycle.export import ExportedLora
from lora_recycle.interop import peft_weighted_adapter, to_peft_model, train_target_lora
from lora_recycle.lorahub import LoraHubResult, lorahub_optimize
from lora_recycle.merges import apply_task_vector, merge_task_vectors, task_vectors
from lora_recycle.model import AdaptiveMergeConfig, AdaptiveMergeModel, get_adaptive_merge_model
from lora_recycle.pool import LoraPool
from lora_recycle.selection import closeness, select_experts
from lora_recycle.training import TrainResult, train_adaptive_merge

try:
    __version__ = version("lora-recycle")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "AdapterError",
    "AdaptiveMergeConfig",
    "AdaptiveMergeModel",
    "ExportedLora",
    "IncompatibleAdapterError",
    "LoraExpert",
    "LoraHubResult",
    "LoraPool",
    "NonFiniteAdapterError",
    "TrainResult",
    "UnsupportedAdapterError",
    "__version__",
    "apply_task_vector",
    "closeness",
    "get_adaptive_merge_model",
    "get_arrow_model",
    "lorahub_optimize",
    "merge_task_vectors",
    "peft_weighted_adapter",
    "presets",
    "reinit_experts",
    "select_experts",
    "task_vectors",
    "to_peft_model",
    "train_adaptive_merge",
    "train_target_lora",
]
