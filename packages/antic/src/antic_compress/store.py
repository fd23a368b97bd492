"""SnapshotStore: one safetensors file per compressed snapshot, keyframes and LoRA deltas.

``snap_000000.safetensors`` ... hold the stored parameters (all of them for a keyframe, the LoRA
factors for a delta) packed into one flat tensor per dtype (``params``, and ``params_fp16`` after
a down-cast) and the normaliser statistics (``norm``). Packing keeps the safetensors header to about
a hundred bytes, which matters when a delta is a few kilobytes. ``store.json`` holds the model class
and configuration, the packing layouts and the index of snapshots (kind, keyframe, time, frame). ``decompress(k, coords)`` reads
at most two files (the keyframe and ``k``), whatever ``k`` is.
"""

from __future__ import annotations

import json
import math
import os
import struct
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from antic_compress.fields import NeuralField, add_lora, apply_lora_state, build_model
from antic_compress.normalizers import NORMALIZERS
from antic_compress.training import predict

Tensor = torch.Tensor
GROUPS = {torch.float32: "params", torch.float16: "params_fp16", torch.float64: "params_fp64"}


def layout_of(params: dict[str, Tensor]) -> list[list[Any]]:
    """``[[name, shape, group], ...]``: how ``pack`` lays ``params`` out."""
    for name, v in params.items():
        if v.dtype not in GROUPS:
            raise TypeError(
                f"cannot store {name} of dtype {v.dtype}; expected one of {list(GROUPS)}"
            )
    return [[name, list(v.shape), GROUPS[v.dtype]] for name, v in params.items()]


def pack(params: dict[str, Tensor]) -> dict[str, Tensor]:
    """One flat tensor per dtype group, in insertion order."""
    groups: dict[str, list[Tensor]] = {}
    for v in params.values():
        groups.setdefault(GROUPS[v.dtype], []).append(v.detach().reshape(-1))
    return {g: torch.cat(vs).contiguous() for g, vs in groups.items()}


def unpack(tensors: dict[str, Tensor], layout: list[list[Any]]) -> dict[str, Tensor]:
    """The inverse of :func:`pack`."""
    offsets = dict.fromkeys(tensors, 0)
    out = {}
    for name, shape, group in layout:
        size = math.prod(shape)
        out[name] = tensors[group][offsets[group] : offsets[group] + size].reshape(shape)
        offsets[group] += size
    return out


@dataclass
class SnapshotRecord:
    """What :meth:`ANTIC.step` returns for a compressed frame, and what the store indexes."""

    index: int  # the snapshot number in the store
    frame: int  # the index of the frame actually compressed (the official code can be off by one)
    t: float
    kind: str  # "key" or "delta"
    keyframe: int  # the snapshot number of the keyframe this one builds on (itself for a key)
    n_params: int  # stored parameters (LoRA factors only for a delta)
    param_bytes: int
    file_bytes: int
    loss: float
    rel_l2: float
    fp16: bool = False


def header_bytes(path: str | Path) -> int:
    """The safetensors header size: the 8-byte length plus the JSON header (the metadata)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
    return 8 + int(n)


class SnapshotStore:
    """A folder of compressed snapshots; usable alone for reading (``decompress``, ``times``)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._index_path = self.path / "store.json"
        self.info: dict[str, Any] = {}
        self.records: list[SnapshotRecord] = []
        if self._index_path.exists():
            data = json.loads(self._index_path.read_text())
            self.info = data["info"]
            self.records = [SnapshotRecord(**r) for r in data["records"]]

    # -- writing ------------------------------------------------------------------------------
    def init(
        self, model: NeuralField, normalizer: str, field_shape: tuple[int, ...], dtype: str
    ) -> None:
        """Record the model and data layout (once, before the first snapshot)."""
        info = {
            "model": type(model).__name__,
            "config": model.config,
            "normalizer": normalizer,
            "field_shape": list(field_shape),
            "dtype": dtype,
        }
        held = {k: v for k, v in self.info.items() if k != "layouts"}
        if self.records and held != info:
            raise ValueError(
                f"store {self.path} holds snapshots of another layout: {held} != {info}"
            )
        self.info = {**info, "layouts": self.info.get("layouts", {})}
        self._write_index()

    def snapshot_path(self, k: int) -> Path:
        return self.path / f"snap_{k:06d}.safetensors"

    def write(
        self, record: SnapshotRecord, params: dict[str, Tensor], norm_stats: dict[str, Tensor]
    ) -> SnapshotRecord:
        """Write snapshot ``record.index``; fills in ``param_bytes`` and ``file_bytes``."""
        if record.index != len(self.records):
            raise ValueError(
                f"snapshot {record.index} written out of order (the store holds {len(self.records)})"
            )
        layouts = self.info.setdefault("layouts", {})
        name = record.kind + ("_fp16" if record.fp16 else "")
        layout = layout_of(params)
        if layouts.setdefault(name, layout) != layout:
            raise ValueError(f"snapshot {record.index} ({name}) does not match the store's layout")
        layouts.setdefault("norm", [[k, list(v.shape)] for k, v in norm_stats.items()])
        tensors = pack(params)
        tensors["norm"] = torch.cat(
            [v.detach().reshape(-1).to(torch.float32).cpu() for v in norm_stats.values()]
        )
        path = self.snapshot_path(record.index)
        tmp = path.with_suffix(".tmp")
        save_file(tensors, str(tmp))
        os.replace(tmp, path)
        record.param_bytes = sum(v.numel() * v.element_size() for v in params.values())
        record.file_bytes = path.stat().st_size
        self.records.append(record)
        self._write_index()
        return record

    def truncate(self, n: int) -> None:
        """Forget snapshots ``n`` and later (a resume from a checkpoint taken at ``n`` snapshots)."""
        for r in self.records[n:]:
            self.snapshot_path(r.index).unlink(missing_ok=True)
        self.records = self.records[:n]
        self._write_index()

    def _write_index(self) -> None:
        tmp = self._index_path.with_suffix(".tmp")
        tmp.write_text(
            json.dumps({"info": self.info, "records": [asdict(r) for r in self.records]}, indent=1)
        )
        os.replace(tmp, self._index_path)

    # -- reading ------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.records)

    def times(self) -> list[float]:
        return [r.t for r in self.records]

    def frames(self) -> list[int]:
        return [r.frame for r in self.records]

    def load_model(self, k: int, merge: bool = False) -> tuple[NeuralField, dict[str, Tensor]]:
        """The model of snapshot ``k`` and its normaliser statistics.

        A delta snapshot is its keyframe plus its LoRA factors: as adapters (the trained model's
        exact arithmetic) or, with ``merge``, folded into the weights (``W += (A B)^T``).
        """
        if not 0 <= k < len(self.records):
            raise IndexError(f"snapshot {k} out of range: the store holds {len(self.records)}")
        record = self.records[k]
        model = build_model(self.info["model"], self.info["config"])
        dtype = next(model.parameters()).dtype
        key_record = self.records[record.keyframe]
        key = load_file(str(self.snapshot_path(record.keyframe)))
        model.load_state_dict({n: v.to(dtype) for n, v in self._unpack(key, key_record).items()})
        own = key if record.kind == "key" else load_file(str(self.snapshot_path(k)))
        if record.kind == "delta":
            factors = {n: v.to(dtype) for n, v in self._unpack(own, record).items()}
            if merge:
                apply_lora_state(model, factors)
            else:  # the adapter form: bit-identical to the model that was trained
                add_lora(model, rank=int(factors["hidden_layers.0.lora_a"].shape[1]))
                model.load_state_dict({**model.state_dict(), **factors})
        norm_layout = [[n, shape, "norm"] for n, shape in self.info["layouts"]["norm"]]
        stats = {n: v.to(torch.float64) for n, v in unpack(own, norm_layout).items()}
        return model.eval(), stats

    def _unpack(self, tensors: dict[str, Tensor], record: SnapshotRecord) -> dict[str, Tensor]:
        return unpack(tensors, self.info["layouts"][record.kind + ("_fp16" if record.fp16 else "")])

    def decompress(self, k: int, coords: Tensor) -> Tensor:
        """Snapshot ``k`` at ``coords`` ``(N, D)``, de-normalised: ``(N, F)``."""
        model, stats = self.load_model(k)
        normalizer = NORMALIZERS[self.info["normalizer"]]
        model = model.to(coords.device)
        return normalizer.denormalize_with(
            predict(model, coords), {n: v.to(coords.device) for n, v in stats.items()}
        )

    def decompress_field(self, k: int, coords: Tensor) -> Tensor:
        """Snapshot ``k`` reshaped to the field's shape."""
        return self.decompress(k, coords).reshape(self.info["field_shape"])
