"""Checkpoints in compressed-tensors' layout (the format vLLM loads).

NVFP4 layers are written as compressed-tensors' ``nvfp4-pack-quantized`` format: per linear layer
``weight_packed`` (uint8 ``[out, in / 2]``, element 2j in the low nibble, as ours),
``weight_scale`` (``float8_e4m3fn`` ``[out, in / 16]``) and ``weight_global_scale`` (float32
``[1]``), a **divisor**: ``x = q · weight_scale / weight_global_scale``, so it is ``1 / tensor_scale``.

MixFP4 layers follow the open compressed-tensors proposal (PR #687, **provisional**: the format name
``mixfp4-pack-quantized`` and the keys may change when it merges): the same three tensors, with bit 7 of
each ``weight_scale`` byte selecting E1M2 (read as the integers 0..7) for that block. Those bytes are
stored with the ``float8_e4m3fn`` dtype but are *bit fields*: a flagged byte reads as a negative scale
under a numeric cast, so a reader must ``.view(torch.uint8)`` them, never ``.to()`` them (the trap the
proposal's review found, and the same one as casting a quantized model).

A layer quantized with ``tensor_scale_convention="divisor"`` already holds the global scale and is
written as it is. For a multiplier layer ``1 / (1 / s)`` is not always ``s`` in float32, so its exact
tensor scale also goes to the file's ``mixfp4`` metadata; :func:`load_compressed_tensors` uses it, so
our round trip is bit-identical, and other readers see a standard file. Layers without that
metadata (files written by other tools, or divisor layers) load in the divisor convention and
decode exactly as compressed-tensors decodes them (``q · (weight_scale / weight_global_scale)``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

from mixfp4.nn import MixFP4Linear
from mixfp4.packed import MX4Packed

__all__ = ["FORMATS", "load_compressed_tensors", "save_compressed_tensors", "to_compressed_tensors"]

FORMATS = {"nvfp4": "nvfp4-pack-quantized", "mixfp4": "mixfp4-pack-quantized"}
_KEY = "mixfp4"


def _config(fmt: str, ignore: list[str]) -> dict[str, Any]:
    weights = {
        "num_bits": 4,
        "type": "float",
        "strategy": "tensor_group",
        "group_size": 16,
        "symmetric": True,
        "dynamic": False,
    }
    return {
        "quant_method": "compressed-tensors",
        "format": FORMATS[fmt],
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}},
        "ignore": ignore,
    }


def to_compressed_tensors(
    model: nn.Module,
) -> tuple[dict[str, torch.Tensor], dict[str, Any], dict[str, int]]:
    """``(state_dict, quantization_config, tensor-scale bits per layer)`` of a quantized ``model``.

    Every :class:`MixFP4Linear` must hold NVFP4 or int-mode MixFP4 with 16-element blocks, all of
    one format, and have ``in_features`` divisible by 16 (compressed-tensors has no padded layout);
    the other modules' tensors are passed through and plain ``nn.Linear`` names listed under
    ``ignore``.
    """
    layers = {fqn: m for fqn, m in model.named_modules() if isinstance(m, MixFP4Linear)}
    if not layers:
        raise ValueError("the model has no MixFP4Linear layer: run mixfp4.quantize_ first")
    fmts = {m.fmt for m in layers.values()}
    if len(fmts) != 1 or not fmts <= set(FORMATS):
        raise ValueError(
            f"compressed-tensors export needs one of {tuple(FORMATS)}, got {sorted(fmts)}"
        )
    for fqn, m in layers.items():
        if m.block_size != 16 or m.e1m2_mode != "int":
            raise ValueError(
                f"layer {fqn!r}: export needs block_size=16 and e1m2_mode='int', got "
                f"{m.block_size} and {m.e1m2_mode!r}"
            )
        if m.in_features % 16:
            # Our codes are zero-padded to a whole block; compressed-tensors has no padded layout
            # (its reader infers in_features = 2 * weight_packed columns and refuses partial
            # groups), so a padded tensor would load with the wrong shape.
            raise ValueError(
                f"layer {fqn!r}: compressed-tensors needs in_features divisible by 16, got "
                f"{m.in_features}; leave this layer unquantized (quantize_'s filter_fn)"
            )
    state: dict[str, torch.Tensor] = {}
    bits: dict[str, int] = {}
    for name, tensor in model.state_dict().items():
        fqn, _, leaf = name.rpartition(".")
        if fqn not in layers:
            state[name] = tensor.detach().cpu().contiguous().clone()
            continue
        p = layers[fqn].packed
        if leaf == "weight":
            state[f"{fqn}.weight_packed"] = p.codes.cpu().contiguous().clone()
        elif leaf == "weight_scales":
            state[f"{fqn}.weight_scale"] = p.scales.cpu().contiguous().view(torch.float8_e4m3fn)
        elif leaf == "weight_tensor_scale_bits":
            s_t = p.tensor_scale.reshape(1).float().cpu()
            if p.tensor_scale_convention == "divisor":  # already compressed-tensors' global scale
                state[f"{fqn}.weight_global_scale"] = s_t.clone()
            else:
                state[f"{fqn}.weight_global_scale"] = 1.0 / s_t
                bits[fqn] = int(tensor.item())
        elif leaf == "weight_layout":
            continue  # compressed-tensors' config says the layout
        else:
            state[name] = tensor.detach().cpu().contiguous().clone()
    ignore = [
        fqn
        for fqn, m in model.named_modules()
        if isinstance(m, nn.Linear) and not isinstance(m, MixFP4Linear)
    ]
    return state, _config(fmts.pop(), ignore), bits


def save_compressed_tensors(model: nn.Module, path: str | Path) -> dict[str, Any]:
    """Write ``model`` to a compressed-tensors safetensors file; returns the quantization config
    (what goes under ``quantization_config`` in the model's ``config.json``)."""
    import safetensors.torch

    state, config, bits = to_compressed_tensors(model)
    # 2-D tiles store each scale byte on every row of the tile, which compressed-tensors reads as
    # 1-D blocks exactly; only our own loader wants to know they were tiles.
    tiled = [
        fqn for fqn, m in model.named_modules() if isinstance(m, MixFP4Linear) and m.block_rows != 1
    ]
    meta = {
        "quantization_config": json.dumps(config),
        _KEY: json.dumps({"tensor_scale_bits": bits, "block_2d": tiled}),
    }
    safetensors.torch.save_file(state, str(path), metadata=meta)
    return config


def load_compressed_tensors(model: nn.Module, path: str | Path) -> nn.Module:
    """Load a compressed-tensors NVFP4 (or provisional MixFP4) file into ``model``, a float model of
    the same architecture: every layer with ``weight_packed`` becomes a :class:`MixFP4Linear`."""
    import safetensors.torch
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
    if "quantization_config" not in meta:
        raise ValueError(f"{path} has no quantization_config metadata")
    fmt_name = json.loads(meta["quantization_config"])["format"]
    fmt = {v: k for k, v in FORMATS.items()}.get(fmt_name)
    if fmt is None:
        raise ValueError(f"unsupported compressed-tensors format {fmt_name!r}; expected {FORMATS}")
    ours = json.loads(meta.get(_KEY, "{}"))
    bits, tiled = ours.get("tensor_scale_bits", {}), set(ours.get("block_2d", []))
    tensors = safetensors.torch.load_file(str(path))
    for name in [n for n in tensors if n.endswith(".weight_packed")]:
        fqn = name.removesuffix(".weight_packed")
        codes = tensors.pop(name)
        scales = tensors.pop(f"{fqn}.weight_scale").view(torch.uint8)
        global_scale = tensors.pop(f"{fqn}.weight_global_scale").reshape(()).float()
        # Our multiplier layers carry their exact scale in the metadata; any other layer is read
        # in compressed-tensors' own convention, so it decodes exactly as compressed-tensors does.
        convention = "multiplier" if fqn in bits else "divisor"
        if fqn in bits:
            s_t = torch.tensor(bits[fqn], dtype=torch.int32).view(torch.float32)
        else:
            s_t = global_scale.clone()
        linear = model.get_submodule(fqn)
        if not isinstance(linear, nn.Linear):
            raise ValueError(f"{fqn!r} is a {type(linear).__name__}, expected nn.Linear")
        packed = MX4Packed(
            codes=codes,
            scales=scales,
            tensor_scale=s_t,
            shape=(linear.out_features, linear.in_features),
            block_size=16,
            fmt=fmt,  # type: ignore[arg-type]
            tensor_scale_convention=convention,
            block_rows=16 if fqn in tiled else 1,
        )
        bias = tensors.get(f"{fqn}.bias")
        layer = MixFP4Linear(packed, bias, dtype=linear.weight.dtype)
        parent_name, _, child = fqn.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, layer)
        tensors[f"{fqn}.weight"] = codes
        tensors[f"{fqn}.weight_scales"] = scales
        tensors[f"{fqn}.weight_tensor_scale_bits"] = layer.weight_tensor_scale_bits
        tensors[f"{fqn}.weight_layout"] = layer.weight_layout
    model.load_state_dict(tensors, strict=True)
    return model
