"""Tiny Llama models built from a config (no download), causal or bidirectional.

Bidirectional (full) attention, for masked-diffusion LMs such as LLaDA, is stored as
``config.is_causal = False``. In transformers 5.x the model's forward wrapper
(``utils.generic.merge_with_config_defaults``) reads that field and passes
``is_causal=False`` both to ``masking_utils.create_causal_mask`` (which then builds a
bidirectional mask, or ``None`` without padding) and to the attention functions. The
attention modules also carry their own ``is_causal`` attribute (``LlamaAttention``
hard-codes ``True``), which SDPA and flash attention fall back to when no keyword is
passed; :func:`set_bidirectional` sets it too, so no code path stays causal by accident,
and :func:`load_model` re-applies it after loading.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, TypeVar

import torch

if TYPE_CHECKING:
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedModel

Model = TypeVar("Model", bound=torch.nn.Module)


def _transformers() -> Any:
    try:
        import transformers
    except ImportError as exc:
        raise ImportError(
            "tiny models need transformers: pip install 'shared-core[models]'"
        ) from exc
    return transformers


def tiny_llama_config(
    vocab_size: int,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    intermediate_size: int | None = None,
    max_position_embeddings: int = 256,
    **overrides: Any,
) -> LlamaConfig:
    """A small ``LlamaConfig``; ``overrides`` are any other ``LlamaConfig`` fields.

    ``intermediate_size`` defaults to ``4 * hidden_size``; key/value heads default to
    ``num_heads`` (no grouped-query attention).
    """
    if vocab_size < 1:
        raise ValueError(f"vocab_size must be >= 1, got {vocab_size}")
    if hidden_size % num_heads:
        raise ValueError(f"hidden_size={hidden_size} is not divisible by num_heads={num_heads}")
    fields: dict[str, Any] = {
        "vocab_size": vocab_size,
        "hidden_size": hidden_size,
        "num_hidden_layers": num_layers,
        "num_attention_heads": num_heads,
        "num_key_value_heads": num_heads,
        "intermediate_size": intermediate_size or 4 * hidden_size,
        "max_position_embeddings": max_position_embeddings,
    }
    fields.update(overrides)
    return _transformers().LlamaConfig(**fields)


def is_bidirectional(model: torch.nn.Module) -> bool:
    """Whether ``model`` was made bidirectional (``config.is_causal`` is ``False``)."""
    return getattr(getattr(model, "config", None), "is_causal", True) is False


def set_bidirectional(model: Model, bidirectional: bool = True) -> Model:
    """Switch ``model``'s self-attention between causal and full (bidirectional), in place.

    Sets ``config.is_causal`` (saved by ``save_pretrained``) and the ``is_causal`` flag of
    every attention module. Raises ``ValueError`` when the model has no such module, since
    then the switch could silently do nothing.
    """
    # Typed Any: nn.Module's __setattr__ annotations reject plain bool attributes.
    attention_modules: list[Any] = [
        module
        for module in model.modules()
        if isinstance(getattr(module, "is_causal", None), bool) and module is not model
    ]
    config = getattr(model, "config", None)
    if config is None or not attention_modules:
        raise ValueError(
            f"{type(model).__name__} has no config or no attention module with an "
            "`is_causal` flag; "
            "cannot switch its attention between causal and bidirectional"
        )
    for module in attention_modules:
        module.is_causal = not bidirectional
    config.is_causal = not bidirectional
    return model


def tiny_llama(
    config: LlamaConfig | None = None,
    *,
    bidirectional: bool = False,
    seed: int = 0,
    **config_kwargs: Any,
) -> LlamaForCausalLM:
    """A freshly initialised ``LlamaForCausalLM`` (no download), seeded.

    Pass either a ``config`` or the arguments of :func:`tiny_llama_config` (at least
    ``vocab_size``). Initialisation uses ``seed`` inside ``torch.random.fork_rng``, so the
    weights are reproducible and the caller's global RNG state is left as it was.
    ``bidirectional=True`` gives full attention (see the module docstring).
    """
    if config is None:
        if "vocab_size" not in config_kwargs:
            raise TypeError("tiny_llama needs a config or at least vocab_size=")
        config = tiny_llama_config(**config_kwargs)
    elif config_kwargs:
        raise TypeError(
            f"pass either config or config keyword arguments, not both (got {sorted(config_kwargs)})"
        )
    transformers = _transformers()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.LlamaForCausalLM(config)
    return set_bidirectional(model, bidirectional)


def load_model(path_or_hub_id: str | os.PathLike[str], **kwargs: Any) -> PreTrainedModel:
    """``AutoModelForCausalLM.from_pretrained`` that also restores bidirectional attention.

    Works for local folders written by ``save_pretrained`` and for real checkpoints (hub
    ids or paths); ``kwargs`` go to ``from_pretrained`` unchanged. When the saved config
    says ``is_causal: false``, the attention modules are switched to match.
    """
    model = _transformers().AutoModelForCausalLM.from_pretrained(str(path_or_hub_id), **kwargs)
    if is_bidirectional(model):
        set_bidirectional(model, True)
    return model
