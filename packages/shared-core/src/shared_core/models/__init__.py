"""Tiny Llama models (causal or bidirectional) and a cached, deterministic training recipe.

transformers is imported when a function needs it, not at import time.
"""

from shared_core.models.tiny import (
    is_bidirectional,
    load_model,
    set_bidirectional,
    tiny_llama,
    tiny_llama_config,
)
from shared_core.models.training import (
    BatchFn,
    TrainedLM,
    causal_lm_loss,
    masked_diffusion_loss,
    train_tiny_lm,
)

__all__ = [
    "BatchFn",
    "TrainedLM",
    "causal_lm_loss",
    "is_bidirectional",
    "load_model",
    "masked_diffusion_loss",
    "set_bidirectional",
    "tiny_llama",
    "tiny_llama_config",
    "train_tiny_lm",
]
