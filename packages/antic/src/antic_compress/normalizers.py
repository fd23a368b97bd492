"""Online normalisers of the compressed targets, with their statistics saved per snapshot.

Targets are ``(N, F)``: statistics are per feature. The statistics a snapshot was trained with are
stored with it, so a snapshot is de-normalised alone.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import torch

Tensor = torch.Tensor


def _check_target(x: Tensor) -> Tensor:
    if x.ndim != 2:
        raise ValueError(f"target must have shape (N, F), got {tuple(x.shape)}")
    return x


class MinMaxNormalizer:
    """Min-max to ``[0, 1]`` over the last ``window`` updates (``window=None``: all of them).

    A feature with ``max == min`` is scaled by 1 (the official code adds 1e-8 instead), so a
    constant field normalises to 0 and back exactly.
    """

    kind = "minmax"

    def __init__(self, window: int | None = 100) -> None:
        if window is not None and (
            isinstance(window, bool) or not isinstance(window, int) or window < 1
        ):
            raise ValueError(f"window must be None or an integer >= 1, got {window!r}")
        self.window = window
        self.mins: deque[Tensor] = deque(maxlen=window)
        self.maxs: deque[Tensor] = deque(maxlen=window)

    def update(self, x: Tensor) -> None:
        x = _check_target(x).to(torch.float64)
        lo, hi = x.min(dim=0).values, x.max(dim=0).values
        if self.window is None and self.mins:  # cumulative: one running extreme
            lo, hi = torch.minimum(lo, self.mins.pop()), torch.maximum(hi, self.maxs.pop())
        self.mins.append(lo)
        self.maxs.append(hi)

    def stats(self) -> dict[str, Tensor]:
        if not self.mins:
            raise RuntimeError("the normaliser has seen no data: call update first")
        lo = torch.stack(list(self.mins)).min(dim=0).values
        hi = torch.stack(list(self.maxs)).max(dim=0).values
        return {"min": lo, "max": hi}

    @staticmethod
    def normalize_with(x: Tensor, stats: dict[str, Tensor]) -> Tensor:
        scale = stats["max"] - stats["min"]
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        return ((x.to(torch.float64) - stats["min"]) / scale).to(x.dtype)

    @staticmethod
    def denormalize_with(y: Tensor, stats: dict[str, Tensor]) -> Tensor:
        scale = stats["max"] - stats["min"]
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        return (y.to(torch.float64) * scale + stats["min"]).to(y.dtype)

    def normalize(self, x: Tensor) -> Tensor:
        return self.normalize_with(x, self.stats())

    def denormalize(self, y: Tensor) -> Tensor:
        return self.denormalize_with(y, self.stats())

    def state_dict(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "mins": [t.clone() for t in self.mins],
            "maxs": [t.clone() for t in self.maxs],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.__init__(state["window"])  # type: ignore[misc]
        self.mins.extend(t.clone() for t in state["mins"])
        self.maxs.extend(t.clone() for t in state["maxs"])


def _merge(
    a: tuple[int, Tensor, Tensor], b: tuple[int, Tensor, Tensor]
) -> tuple[int, Tensor, Tensor]:
    # Chan et al.'s parallel Welford merge of (count, mean, M2).
    na, ma, m2a = a
    nb, mb, m2b = b
    n = na + nb
    d = mb - ma
    return n, ma + d * (nb / n), m2a + m2b + d * d * (na * nb / n)


def _unmerge(
    total: tuple[int, Tensor, Tensor], b: tuple[int, Tensor, Tensor]
) -> tuple[int, Tensor, Tensor]:
    # The inverse of _merge: remove the batch b from the running total.
    n, m, m2 = total
    nb, mb, m2b = b
    na = n - nb
    if na == 0:
        return 0, torch.zeros_like(m), torch.zeros_like(m2)
    ma = (n * m - nb * mb) / na
    d = mb - ma
    return na, ma, m2 - m2b - d * d * (na * nb / n)


class WelfordNormalizer:
    """Z-score over the last ``window`` updates, by Welford merge of each new snapshot and unmerge
    of the one leaving the window (population variance; ``std == 0`` scales by 1)."""

    kind = "welford"

    def __init__(self, window: int = 100) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be an integer >= 1, got {window!r}")
        self.window = window
        self.batches: deque[tuple[int, Tensor, Tensor]] = deque()
        self.total: tuple[int, Tensor, Tensor] | None = None

    def update(self, x: Tensor) -> None:
        x = _check_target(x).to(torch.float64)
        mean = x.mean(dim=0)
        batch = (x.shape[0], mean, ((x - mean) ** 2).sum(dim=0))
        self.total = batch if self.total is None else _merge(self.total, batch)
        self.batches.append(batch)
        if len(self.batches) > self.window:
            self.total = _unmerge(self.total, self.batches.popleft())

    def stats(self) -> dict[str, Tensor]:
        if self.total is None:
            raise RuntimeError("the normaliser has seen no data: call update first")
        n, mean, m2 = self.total
        return {"mean": mean.clone(), "std": (m2.clamp_min(0) / n).sqrt()}

    @staticmethod
    def normalize_with(x: Tensor, stats: dict[str, Tensor]) -> Tensor:
        std = torch.where(stats["std"] > 0, stats["std"], torch.ones_like(stats["std"]))
        return ((x.to(torch.float64) - stats["mean"]) / std).to(x.dtype)

    @staticmethod
    def denormalize_with(y: Tensor, stats: dict[str, Tensor]) -> Tensor:
        std = torch.where(stats["std"] > 0, stats["std"], torch.ones_like(stats["std"]))
        return (y.to(torch.float64) * std + stats["mean"]).to(y.dtype)

    def normalize(self, x: Tensor) -> Tensor:
        return self.normalize_with(x, self.stats())

    def denormalize(self, y: Tensor) -> Tensor:
        return self.denormalize_with(y, self.stats())

    def state_dict(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "batches": [(n, m.clone(), s.clone()) for n, m, s in self.batches],
            "total": self.total,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.__init__(state["window"])  # type: ignore[misc]
        self.batches.extend((int(n), m.clone(), s.clone()) for n, m, s in state["batches"])
        total = state["total"]
        self.total = None if total is None else (int(total[0]), total[1].clone(), total[2].clone())


Normalizer = MinMaxNormalizer | WelfordNormalizer
NORMALIZERS: dict[str, type[MinMaxNormalizer] | type[WelfordNormalizer]] = {
    "minmax": MinMaxNormalizer,
    "welford": WelfordNormalizer,
}
