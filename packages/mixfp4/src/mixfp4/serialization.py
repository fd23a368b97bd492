"""Saving packed tensors and quantized models to safetensors, and loading them back bit-identically.

The bytes are stored as they are (uint8 codes and scale bytes, float32 tensor scale); what is not a
tensor (shapes, block size, format, the activation setting of each layer) goes to the file's string
metadata as JSON under the key ``"mixfp4"``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from mixfp4.nn import MixFP4Linear
from mixfp4.packed import MX4Packed

__all__ = ["load_packed", "load_quantized", "save_packed", "save_quantized"]

_KEY = "mixfp4"


def _safetensors() -> Any:
    try:
        import safetensors.torch
    except ImportError as exc:  # pragma: no cover - safetensors is a base dependency
        raise ImportError("saving needs safetensors: pip install safetensors") from exc
    return safetensors.torch


def _read(path: str | Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    st = _safetensors()
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
    if _KEY not in meta:
        raise ValueError(f"{path} was not written by mixfp4 (no {_KEY!r} metadata)")
    return st.load_file(str(path)), json.loads(meta[_KEY])


def save_packed(path: str | Path, tensors: Mapping[str, MX4Packed]) -> None:
    """Write named :class:`MX4Packed` tensors to one safetensors file."""
    out: dict[str, torch.Tensor] = {}
    meta: dict[str, Any] = {}
    for name, packed in tensors.items():
        if not isinstance(packed, MX4Packed):
            raise TypeError(f"{name!r} is a {type(packed).__name__}, expected MX4Packed")
        out.update({k: v.cpu() for k, v in packed.tensors(f"{name}.").items()})
        meta[name] = packed.metadata()
    _safetensors().save_file(out, str(path), metadata={_KEY: json.dumps({"packed": meta})})


def load_packed(path: str | Path) -> dict[str, MX4Packed]:
    """Read what :func:`save_packed` wrote."""
    tensors, meta = _read(path)
    if "packed" not in meta:
        raise ValueError(f"{path} holds a quantized model, not packed tensors: use load_quantized")
    return {
        name: MX4Packed.from_parts(tensors, m, prefix=f"{name}.")
        for name, m in meta["packed"].items()
    }


def save_quantized(model: nn.Module, path: str | Path) -> None:
    """Write ``model``'s full state dict with the bytes of every :class:`MixFP4Linear` in it."""
    layers = {
        fqn: {
            **m.packed.metadata(),
            "act": m.act,
            "dtype": str(m.dtype).removeprefix("torch."),
            "bias": m.bias is not None,
        }
        for fqn, m in model.named_modules()
        if isinstance(m, MixFP4Linear)
    }
    # Clone so that tied parameters (shared storage) are written as separate, plain tensors.
    state = {k: v.detach().cpu().contiguous().clone() for k, v in model.state_dict().items()}
    meta = json.dumps({"layers": layers}, default=float)
    _safetensors().save_file(state, str(path), metadata={_KEY: meta})


def _layer_packed(tensors: dict[str, torch.Tensor], info: dict[str, Any], fqn: str) -> MX4Packed:
    """The packed weight of layer ``fqn``; rewrites 0.1 files' keys (``weight_codes`` and a float
    ``weight_tensor_scale``) to the 0.2 ones (``weight`` and ``weight_tensor_scale_bits``)."""
    legacy = tensors.pop(f"{fqn}.weight_codes", None)
    if legacy is not None:
        tensors[f"{fqn}.weight"] = legacy
        scale = tensors.pop(f"{fqn}.weight_tensor_scale").reshape(()).float()
        tensors[f"{fqn}.weight_tensor_scale_bits"] = scale.clone().view(torch.int32)
    parts = {
        "codes": tensors[f"{fqn}.weight"],
        "scales": tensors[f"{fqn}.weight_scales"],
        "tensor_scale": tensors[f"{fqn}.weight_tensor_scale_bits"].view(torch.float32),
    }
    return MX4Packed.from_parts(parts, info)


def load_quantized(model: nn.Module, path: str | Path) -> nn.Module:
    """Load a file written by :func:`save_quantized` into ``model``, a float model of the same
    architecture: the quantized layers are rebuilt from the stored bytes, the rest is loaded as
    usual (strictly). Returns ``model``."""
    tensors, meta = _read(path)
    if "layers" not in meta:
        raise ValueError(f"{path} holds packed tensors, not a model: use load_packed")
    for fqn, info in meta["layers"].items():
        packed = _layer_packed(tensors, info, fqn)
        bias = tensors.get(f"{fqn}.bias") if info["bias"] else None
        act = None if info["act"] is None else (info["act"][0], dict(info["act"][1]))
        layer = MixFP4Linear(packed, bias, act=act, dtype=getattr(torch, info["dtype"]))
        parent_name, _, child = fqn.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, layer)
        # files written before 0.2's weight_layout buffer: the metadata above says the layout
        tensors.setdefault(f"{fqn}.weight_layout", layer.weight_layout)
    model.load_state_dict(tensors, strict=True)
    return model
