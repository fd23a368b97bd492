"""ANTIC: the in-situ streaming loop (temporal selector, then neural-field compression).

One pass over the simulation, holding only the current frame, the selector's small queue and the
model. The first frame is a keyframe (all parameters, ``initial_epochs``). With ``adapter="lora"``
every later snapshot trains only LoRA factors on the hidden layers, warm-started from the previous
snapshot and saved as a delta; every ``reset_every_n``-th selection merges them into the base,
trains all parameters and saves a keyframe. ``"full"`` fine-tunes all parameters each snapshot;
``"scratch"`` re-initialises the model each snapshot (the control for warm-starting).
A NaN loss rebuilds the model and retrains all parameters (a keyframe).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

import torch

from antic_compress.compressor import NeuralFieldCompressor
from antic_compress.fields import add_lora, has_lora, hidden_linears, lora_state, remove_lora
from antic_compress.selectors import TemporalSelector
from antic_compress.store import SnapshotRecord, SnapshotStore
from antic_compress.training import FitConfig, Trainable, predict

Tensor = torch.Tensor
Adapter = Literal["lora", "full", "scratch"]
ADAPTERS = ("lora", "full", "scratch")
CHECKPOINT = "checkpoint.pt"
FP16_LOSS_RATIO = 2.0  # the official validate_downcast bound


def rel_l2(x: Tensor, ref: Tensor) -> float:
    """``||x - ref|| / ||ref||`` in float64 (``||x||`` when ``ref`` is zero)."""
    d = float((x.to(torch.float64) - ref.to(torch.float64)).norm())
    r = float(ref.to(torch.float64).norm())
    return d / r if r > 0 else d


class ANTIC:
    """The streaming compressor. Call :meth:`step` on every frame, in time order.

    ``coords`` are the ``(N, D)`` coordinates of the field's points (``grid_coords``); a frame has
    ``N * out_dim`` values (shape ``(n, n)`` or ``(n, n, F)``). ``stop_at``: after the first frame
    with ``t >= stop_at`` the run checkpoints (selector, normaliser, model, ``solver_state``) and
    stops; :meth:`resume` continues it.
    """

    def __init__(
        self,
        selector: TemporalSelector,
        compressor: NeuralFieldCompressor,
        coords: Tensor,
        store: SnapshotStore | str | Path,
        *,
        initial_epochs: int = 20,
        subsequent_epochs: int = 10,
        lr: float = 1e-3,
        weight_decay: float = 1e-4,
        end_lr: float = 1e-5,
        batch_size: int = 10_000,
        adapter: Adapter = "lora",
        lora_rank: int = 16,
        reset_every_n: int = 50,
        downcast_fp16: bool = False,
        seed: int = 42,
        stop_at: float | None = None,
        distributed: bool = False,
    ) -> None:
        if adapter not in ADAPTERS:
            raise ValueError(f"adapter must be one of {ADAPTERS}, got {adapter!r}")
        if (
            isinstance(reset_every_n, bool)
            or not isinstance(reset_every_n, int)
            or reset_every_n < 0
        ):
            raise ValueError(
                f"reset_every_n must be an integer >= 0 (0: never), got {reset_every_n!r}"
            )
        if coords.ndim != 2 or coords.shape[1] != compressor.in_dim:
            raise ValueError(f"coords must be (N, {compressor.in_dim}), got {tuple(coords.shape)}")
        param_dtype = next(compressor.model.parameters()).dtype
        if coords.dtype != param_dtype:
            raise ValueError(
                f"coords are {coords.dtype} but the model's parameters are {param_dtype}"
            )
        if adapter == "lora":
            hidden = hidden_linears(compressor.model)
            limit = min(min(layer.in_features, layer.out_features) for layer in hidden)
            if (
                isinstance(lora_rank, bool)
                or not isinstance(lora_rank, int)
                or not 1 <= lora_rank <= limit
            ):
                raise ValueError(
                    f"lora_rank must be an integer in [1, min(in, out)] = [1, {limit}], got {lora_rank!r}"
                )
        if stop_at is not None and math.isnan(stop_at):
            raise ValueError("stop_at must be a number or None, got nan")
        self.selector, self.compressor, self.coords = selector, compressor, coords
        self.store = store if isinstance(store, SnapshotStore) else SnapshotStore(store)
        self.initial = FitConfig(initial_epochs, lr, weight_decay, end_lr, batch_size)
        self.subsequent = FitConfig(subsequent_epochs, lr, weight_decay, end_lr, batch_size)
        self.adapter, self.lora_rank, self.reset_every_n = adapter, lora_rank, reset_every_n
        self.downcast_fp16, self.seed, self.stop_at, self.distributed = (
            downcast_fp16,
            seed,
            stop_at,
            distributed,
        )
        self.field_shape: tuple[int, ...] | None = None
        self.t_last = -math.inf
        self.stopped = False
        self._times: dict[int, float] = {}

    # -- the loop -----------------------------------------------------------------------------
    def step(self, field: Tensor, t: float) -> SnapshotRecord | None:
        """Feed one frame; the record of the snapshot it made, or ``None`` if skipped."""
        if self.stopped:
            raise RuntimeError(
                f"the run stopped at t={self.t_last} (stop_at={self.stop_at}); use ANTIC.resume"
            )
        field = self._check_field(field, t)
        keep = self.selector.decide(field)
        self._times[self.selector.idx] = float(t)
        record = self._compress() if keep else None
        self.t_last = float(t)
        for i in [i for i in self._times if i < self.selector.idx - 1]:
            del self._times[i]
        if self.stop_at is not None and t >= self.stop_at:
            self.checkpoint()
            self.stopped = True
        return record

    def run(self, frames: Any) -> list[SnapshotRecord]:
        """Step through ``(t, field)`` pairs until they end or ``stop_at`` is reached."""
        records = []
        for t, field in frames:
            record = self.step(field, t)
            if record is not None:
                records.append(record)
            if self.stopped:
                break
        return records

    def _check_field(self, field: Tensor, t: float) -> Tensor:
        field = torch.as_tensor(field)
        if not bool(torch.isfinite(field).all()):
            raise ValueError(f"field at t={t} contains NaN/Inf")
        if not t > self.t_last:
            raise ValueError(f"times must increase: t={t} after t={self.t_last}")
        if self.field_shape is None:
            n, f = self.coords.shape[0], self.compressor.out_dim
            if field.numel() != n * f:
                raise ValueError(
                    f"field of shape {tuple(field.shape)} has {field.numel()} values; coords {tuple(self.coords.shape)} "
                    f"and out_dim={f} need {n * f}"
                )
            self.field_shape = tuple(field.shape)
            self.store.init(
                self.compressor.model,
                self.compressor.normalization,
                self.field_shape,
                str(field.dtype),
            )
        elif tuple(field.shape) != self.field_shape:
            raise ValueError(
                f"field shape changed from {self.field_shape} to {tuple(field.shape)} at t={t}"
            )
        return field

    def _plan(self, k: int) -> tuple[Trainable, FitConfig]:
        """What snapshot ``k`` trains, preparing the model for it."""
        c = self.compressor
        if k == 0:
            return "all", self.initial
        if self.adapter == "scratch":
            c.model = c.fresh_model()
            return "all", self.subsequent
        if self.adapter == "full":
            return "all", self.subsequent
        if self.reset_every_n > 0 and self.selector.selected_num % self.reset_every_n == 0:
            remove_lora(c.model, merge=True)  # a keyframe: fold the deltas in, train everything
            return "all", self.subsequent
        return "lora", self.subsequent

    def _compress(self) -> SnapshotRecord:
        c, k = self.compressor, len(self.store)
        frame = self.selector.last_selected_index
        if frame not in self._times or self.selector.last_selected is None:
            raise RuntimeError(f"selector asked for frame {frame}, which is no longer held")
        target = self.selector.last_selected.reshape(self.coords.shape[0], c.out_dim).to(
            self.coords.dtype
        )
        which, config = self._plan(k)
        c.normalizer.update(target)
        stats = c.normalizer.stats()
        normed = c.normalizer.normalize_with(target, stats)
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + k)
        loss = c.fit(self.coords, normed, config, which, g, self.distributed)
        if math.isnan(loss):
            warnings.warn(
                f"NaN loss at snapshot {k} (t={self._times[frame]}): rebuilding the model",
                stacklevel=2,
            )
            c.model = c.fresh_model()
            which = "all"
            loss = c.fit(self.coords, normed, config, which, g, self.distributed)
        params = dict(c.model.state_dict()) if which == "all" else lora_state(c.model)
        fp16 = self.downcast_fp16 and self._downcast(params, normed, loss)
        recon = c.normalizer.denormalize_with(predict(c.model, self.coords), stats)
        kind = "key" if which == "all" else "delta"
        keyframe = k if kind == "key" else self.store.records[-1].keyframe
        record = SnapshotRecord(
            index=k,
            frame=frame,
            t=self._times[frame],
            kind=kind,
            keyframe=keyframe,
            n_params=sum(v.numel() for v in params.values()),
            param_bytes=0,
            file_bytes=0,
            loss=loss,
            rel_l2=rel_l2(recon, target),
            fp16=fp16,
        )
        self.store.write(record, params, stats)
        if self.adapter == "lora" and not has_lora(c.model):
            add_lora(c.model, self.lora_rank, seed=self.seed)
        return record

    def _downcast(self, params: dict[str, Tensor], normed: Tensor, loss: float) -> bool:
        """Store the hidden layers' parameters in fp16 if the loss at most doubles (then keep them)."""
        names = [n for n in params if n.startswith("hidden_layers.")]
        model = self.compressor.model
        full = dict(model.state_dict())
        rounded = {n: full[n].to(torch.float16).to(full[n].dtype) for n in names}
        base = self.compressor.loss(self.coords, normed)
        model.load_state_dict({**full, **rounded})
        if self.compressor.loss(self.coords, normed) > FP16_LOSS_RATIO * max(base, 1e-30):
            model.load_state_dict(full)
            return False
        for n in names:
            params[n] = rounded[n].to(torch.float16)
        return True

    # -- accounting ---------------------------------------------------------------------------
    def stats(self) -> dict[str, float]:
        """Temporal, spatial and total compression ratios, from parameter counts and real bytes.

        ``spatial_cr`` = kept frames x N x F / stored parameters (keyframes amortised);
        ``total_cr`` = all frames x N x F / stored parameters; the ``_bytes`` variants divide the
        raw frames' bytes by the files' bytes.
        """
        records = self.store.records
        if not records or self.field_shape is None:
            raise RuntimeError("no snapshot stored yet")
        values = math.prod(self.field_shape)
        itemsize = torch.empty((), dtype=self.coords.dtype).element_size()
        params = sum(r.n_params for r in records)
        nbytes = sum(r.file_bytes for r in records)
        kept, total = len(records), self.selector.total_num
        return {
            "frames": float(total),
            "snapshots": float(kept),
            "keyframes": float(sum(r.kind == "key" for r in records)),
            "temporal_cr": total / kept,
            "spatial_cr": kept * values / params,
            "total_cr": total * values / params,
            "spatial_cr_bytes": kept * values * itemsize / nbytes,
            "total_cr_bytes": total * values * itemsize / nbytes,
            "bytes_written": float(nbytes),
            "rel_l2_mean": sum(r.rel_l2 for r in records) / kept,
        }

    # -- resume -------------------------------------------------------------------------------
    def checkpoint(self, solver_state: dict[str, Any] | None = None) -> Path:
        """Save what a resume needs: selector, normaliser, model, counters and ``solver_state``."""
        self._solver_state = (
            solver_state if solver_state is not None else getattr(self, "_solver_state", None)
        )
        path = self.store.path / CHECKPOINT
        state = {
            "selector": self.selector.state_dict(),
            "normalizer": self.compressor.normalizer.state_dict(),
            "model": self.compressor.model.state_dict(),
            "has_lora": has_lora(self.compressor.model),
            "snapshots": len(self.store),
            "field_shape": self.field_shape,
            "t_last": self.t_last,
            "times": dict(self._times),
            "solver_state": self._solver_state,
            "records": [asdict(r) for r in self.store.records],
        }
        tmp = path.with_suffix(".tmp")
        torch.save(state, tmp)
        tmp.replace(path)
        return path

    def set_solver_state(self, solver_state: dict[str, Any]) -> None:
        """The simulation's state to save with the next checkpoint (so a resume restarts it)."""
        self._solver_state = solver_state

    @classmethod
    def resume(
        cls,
        selector: TemporalSelector,
        compressor: NeuralFieldCompressor,
        coords: Tensor,
        store: SnapshotStore | str | Path,
        *,
        stop_at: float | None = None,
        **kwargs: Any,
    ) -> tuple[ANTIC, dict[str, Any] | None]:
        """Continue a stopped run from its checkpoint; returns ``(antic, solver_state)``.

        Pass the same objects (fresh) and settings as the first run; ``stop_at`` must lie after the
        stored time.
        """
        self = cls(selector, compressor, coords, store, stop_at=stop_at, **kwargs)
        path = self.store.path / CHECKPOINT
        if not path.exists():
            raise FileNotFoundError(f"no checkpoint at {path}")
        state = torch.load(path, weights_only=False)
        if stop_at is not None and stop_at <= state["t_last"]:
            raise ValueError(f"stop_at={stop_at} must be after the stored time t={state['t_last']}")
        selector.load_state_dict(state["selector"])
        compressor.normalizer.load_state_dict(state["normalizer"])
        if state["has_lora"]:
            add_lora(compressor.model, self.lora_rank, seed=self.seed)
        compressor.model.load_state_dict(state["model"])
        self.store.truncate(state["snapshots"])
        self.field_shape = tuple(state["field_shape"]) if state["field_shape"] is not None else None
        self.t_last = float(state["t_last"])
        self._times = {int(k): float(v) for k, v in state["times"].items()}
        self._solver_state = state["solver_state"]
        return self, state["solver_state"]
