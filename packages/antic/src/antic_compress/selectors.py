"""Physics-aware temporal selectors (PATS): decide, frame by frame, which snapshots to compress.

Each selector is usable alone: ``decide(frame) -> bool`` (the first call keeps the first frame),
``compress_ratio()`` (frames seen / frames kept), ``state_dict()`` / ``load_state_dict()``.
``last_selected_index`` is the index of the frame a ``True`` asks to compress: for the enstrophy
selector that can be the frame *before* the current one (the official code compresses that anchor
but records the current index; we record the anchor's).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import Any

import torch

Tensor = torch.Tensor
Activity = Callable[[Tensor], float]


def pearson(a: Tensor, b: Tensor) -> float:
    """Pearson correlation of two fields, defined when either is constant: 1 if both are, else 0."""
    x = a.reshape(-1).to(torch.float64)
    y = b.reshape(-1).to(torch.float64)
    x = x - x.mean()
    y = y - y.mean()
    nx, ny = float(x.norm()), float(y.norm())
    if nx == 0.0 or ny == 0.0:
        return 1.0 if nx == ny else 0.0
    return float((x @ y) / (nx * ny))


def _max_abs(a: float, b: float) -> float:
    return abs(a - b)


def _check_finite(frame: Tensor, where: str) -> None:
    if not bool(torch.isfinite(frame).all()):
        raise ValueError(f"{where}: the frame contains NaN/Inf")


class TemporalSelector:
    """Base bookkeeping: ``total_num``, ``selected_num``, ``idx`` and the kept indices.

    Subclasses implement ``_init(frame)`` (seed state with the first frame) and ``_decide(frame)``.
    The first frame is always kept and counts as selected.
    """

    def __init__(self) -> None:
        self.total_num = 0
        self.selected_num = 0
        self.idx = -1
        self.selected_indices: list[int] = []
        self.last_selected_index = -1
        self.last_selected: Tensor | None = None

    def decide(self, frame: Tensor) -> bool:
        """Whether to compress now; on ``True`` compress ``last_selected`` (index ``last_selected_index``)."""
        frame = torch.as_tensor(frame)
        _check_finite(frame, f"{type(self).__name__}.decide at frame {self.idx + 1}")
        self.total_num += 1
        self.idx += 1
        if self.idx == 0:
            self._init(frame)
            keep = True
            self.last_selected, self.last_selected_index = frame, 0
        else:
            keep = self._decide(frame)
        if keep:
            self.selected_num += 1
            self.selected_indices.append(self.last_selected_index)
        return keep

    def compress_ratio(self) -> float:
        """Temporal compression ratio ``total_num / selected_num`` (1.0 before any frame)."""
        return self.total_num / self.selected_num if self.selected_num else 1.0

    # -- subclass hooks ---------------------------------------------------------------------------
    def _init(self, frame: Tensor) -> None:
        pass

    def _decide(self, frame: Tensor) -> bool:
        raise NotImplementedError

    def _keep_current(self, frame: Tensor) -> bool:
        self.last_selected, self.last_selected_index = frame, self.idx
        return True

    # -- state ------------------------------------------------------------------------------------
    def _extra_state(self) -> dict[str, Any]:
        return {}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        pass

    def state_dict(self) -> dict[str, Any]:
        """Everything ``decide`` depends on (tensors cloned), loadable by ``load_state_dict``."""
        state: dict[str, Any] = {
            "total_num": self.total_num,
            "selected_num": self.selected_num,
            "idx": self.idx,
            "selected_indices": list(self.selected_indices),
            "last_selected_index": self.last_selected_index,
            "last_selected": None if self.last_selected is None else self.last_selected.clone(),
        }
        state.update(self._extra_state())
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.total_num = int(state["total_num"])
        self.selected_num = int(state["selected_num"])
        self.idx = int(state["idx"])
        self.selected_indices = [int(i) for i in state["selected_indices"]]
        self.last_selected_index = int(state["last_selected_index"])
        last = state["last_selected"]
        self.last_selected = None if last is None else last.clone()
        self._load_extra_state(state)


def _positive_int(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


class EnstrophySelector(TemporalSelector):
    """Enstrophy-flux selector for 2-D Navier-Stokes, as written in the official code.

    Keeps skipping while ``|E - E_anchor| / e_diff0 <= sqrt(max_flux / mean_flux)`` and
    ``pearson(frame, anchor) >= corr_threshold``; forces a selection after ``window_size`` frames in
    bounds; on a break it compresses the previous in-bounds frame and makes it the new anchor.
    ``maxx_flux`` is never reset after a selection (the official behaviour). ``E = mean(f**2)``.
    """

    def __init__(
        self,
        metric: str | Callable[[float, float], float] = "max_abs",
        window_size: int = 10,
        corr_threshold: float = 0.90,
    ) -> None:
        super().__init__()
        if metric == "max_abs":
            self.metric: Callable[[float, float], float] = _max_abs
        elif callable(metric):
            self.metric = metric
        else:
            raise ValueError(f"metric must be 'max_abs' or a callable, got {metric!r}")
        self.window_size = _positive_int("window_size", window_size)
        if not -1.0 <= corr_threshold <= 1.0 or math.isnan(corr_threshold):
            raise ValueError(f"corr_threshold must lie in [-1, 1], got {corr_threshold!r}")
        self.corr_threshold = float(corr_threshold)
        self._reset_window()
        self.maxx_flux = 0.0
        self.last_selected_e = 0.0

    def _reset_window(self) -> None:
        self.queue: deque[tuple[Tensor, float, float]] = deque()
        self.flux_sum = 0.0
        self.e_diff0: float | None = None
        self.prev: tuple[Tensor, float] | None = None

    @staticmethod
    def activity(frame: Tensor) -> float:
        """Enstrophy up to a constant: ``mean(f**2)`` (float64)."""
        return float((frame.to(torch.float64) ** 2).mean())

    def _init(self, frame: Tensor) -> None:
        self.last_selected_e = self.activity(frame)
        self._reset_window()
        self.maxx_flux = 0.0

    def _decide(self, frame: Tensor) -> bool:
        e = self.activity(frame)
        ref = self.queue[-1][1] if self.queue else self.last_selected_e
        step = self.metric(e, ref)
        self.maxx_flux = max(self.maxx_flux, step)
        self.flux_sum += step
        self.queue.append((frame, e, step))
        if self.e_diff0 is None:
            self.e_diff0 = self.metric(e, self.last_selected_e)
        if self.maxx_flux == 0.0 and len(self.queue) < self.window_size:
            self.prev = (frame, e)
            return False  # warm-up: no flux history yet
        factor = math.sqrt(self.maxx_flux / (self.flux_sum / len(self.queue) + 1e-8))
        change = self.metric(e, self.last_selected_e) / (self.e_diff0 + 1e-8)
        assert self.last_selected is not None
        if change <= factor and pearson(frame, self.last_selected) >= self.corr_threshold:
            if len(self.queue) < self.window_size:
                self.prev = (frame, e)
                return False
            self.last_selected_e = e
            self._reset_window()
            return self._keep_current(frame)  # forced progress after a full window
        return self._break(frame, e)

    def _break(self, frame: Tensor, e: float) -> bool:
        # The criterion broke: compress the last in-bounds frame (the one before this) and anchor on it.
        if self.prev is not None:
            self.last_selected, self.last_selected_e = self.prev
            self.last_selected_index = self.idx - 1
            diff = self.metric(e, self.last_selected_e)
            self.queue = deque([(frame, e, diff)])
            self.e_diff0, self.flux_sum = diff, diff
        else:
            self.last_selected, self.last_selected_e = frame, e
            self.last_selected_index = self.idx
            self.queue = deque()
            self.e_diff0, self.flux_sum = None, 0.0
        self.prev = (frame, e)
        return True

    def _extra_state(self) -> dict[str, Any]:
        return {
            "queue": [(f.clone(), e, s) for f, e, s in self.queue],
            "maxx_flux": self.maxx_flux,
            "flux_sum": self.flux_sum,
            "e_diff0": self.e_diff0,
            "prev": None if self.prev is None else (self.prev[0].clone(), self.prev[1]),
            "last_selected_e": self.last_selected_e,
        }

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self.queue = deque((f.clone(), float(e), float(s)) for f, e, s in state["queue"])
        self.maxx_flux = float(state["maxx_flux"])
        self.flux_sum = float(state["flux_sum"])
        self.e_diff0 = None if state["e_diff0"] is None else float(state["e_diff0"])
        prev = state["prev"]
        self.prev = None if prev is None else (prev[0].clone(), float(prev[1]))
        self.last_selected_e = float(state["last_selected_e"])


def _scalar_activity(frame: Tensor) -> float:
    return float(frame.to(torch.float64).abs().max())


class SurgeSelector(TemporalSelector):
    """Persistent-median surge selector (the official BSSN selector on ``|Psi4|``).

    ``activity`` maps a frame to a scalar (default ``max|frame|``; pass a 0-d tensor to feed the
    signal directly). Keeps every frame until ``history_len`` activities are seen; then a frame
    whose activity exceeds ``surge_factor`` times the median is a surge and is kept at once (even
    mid-skip); a quiet frame is kept and starts a skip of ``window_size`` frames. After
    ``patience_factor * window_size`` consecutive surge frames the surge level enters the history.
    """

    def __init__(
        self,
        window_size: int = 5,
        surge_factor: float = 1.55,
        history_len: int = 60,
        patience_factor: int = 5,
        activity: Activity = _scalar_activity,
    ) -> None:
        super().__init__()
        self.window_size = _positive_int("window_size", window_size)
        if not surge_factor > 1.0:
            raise ValueError(f"surge_factor must be > 1, got {surge_factor!r}")
        self.surge_factor = float(surge_factor)
        self.history_len = _positive_int("history_len", history_len)
        self.patience_factor = _positive_int("patience_factor", patience_factor)
        self.activity = activity
        self.history: deque[float] = deque(maxlen=history_len)
        self.surge_count = 0
        self.skip_remaining = 0

    @property
    def patience_limit(self) -> int:
        return self.window_size * self.patience_factor

    def _init(self, frame: Tensor) -> None:
        # The official base class routes the first frame through _decide too: it enters the history.
        self.history.append(self.activity(frame))

    def _decide(self, frame: Tensor) -> bool:
        a = self.activity(frame)
        if len(self.history) < self.history_len:
            self.history.append(a)
            return self._keep_current(frame)
        surge = a > self.surge_factor * float(torch.tensor(list(self.history)).median())
        if self.skip_remaining > 0:
            self.skip_remaining -= 1
            if surge:
                self.skip_remaining = 0
                self.history.append(a)
                return self._keep_current(frame)
            if self.skip_remaining == 0:
                self.history.append(a)
                self.skip_remaining = self.window_size
                return self._keep_current(frame)
            return False
        if surge:
            self.surge_count += 1
            if self.surge_count > self.patience_limit:
                self.history.append(a)  # a prolonged surge is the new regime
                self.surge_count = 0
            return self._keep_current(frame)
        self.surge_count = 0
        self.history.append(a)
        self.skip_remaining = self.window_size
        return self._keep_current(frame)

    def _extra_state(self) -> dict[str, Any]:
        return {
            "history": list(self.history),
            "surge_count": self.surge_count,
            "skip_remaining": self.skip_remaining,
        }

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self.history = deque((float(a) for a in state["history"]), maxlen=self.history_len)
        self.surge_count = int(state["surge_count"])
        self.skip_remaining = int(state["skip_remaining"])


def kdv_activity(length: float = 50.0, alpha: float = 6.0) -> Activity:
    """``max|u_t|`` with ``u_t = -u_xxx - alpha u u_x`` (pseudo-spectral) on a periodic 1-D grid."""

    def activity(u: Tensor) -> float:
        n = u.shape[-1]
        k = torch.fft.fftfreq(n, d=length / (2 * math.pi * n)).to(torch.float64)
        u_hat = torch.fft.fft(u.to(torch.float64))
        u_x = torch.fft.ifft(1j * k * u_hat).real
        u_xxx = torch.fft.ifft(-1j * k**3 * u_hat).real
        return float((-u_xxx - alpha * u.to(torch.float64) * u_x).abs().max())

    return activity


class QuantileActivitySelector(TemporalSelector):
    """The official KdV selector: keep a frame whose activity leaves the rolling quantile band.

    Keep iff ``activity > quantile(history, high)`` or ``< quantile(history, low)`` over the last
    ``window_size`` activities (the history is seeded with the first frame's).
    """

    def __init__(
        self,
        high_quantile: float = 0.95,
        low_quantile: float = 0.05,
        window_size: int = 10,
        activity: Activity | None = None,
    ) -> None:
        super().__init__()
        if not 0.0 < low_quantile < high_quantile < 1.0:
            raise ValueError(
                f"quantiles must satisfy 0 < low < high < 1, got low={low_quantile!r}, high={high_quantile!r}"
            )
        self.high_quantile, self.low_quantile = float(high_quantile), float(low_quantile)
        self.window_size = _positive_int("window_size", window_size)
        self.activity = activity if activity is not None else kdv_activity()
        self.history: deque[float] = deque(maxlen=window_size)

    def _init(self, frame: Tensor) -> None:
        self.history.clear()
        self.history.append(self.activity(frame))

    def _decide(self, frame: Tensor) -> bool:
        a = self.activity(frame)
        recent = torch.tensor(list(self.history), dtype=torch.float64)
        high = float(torch.quantile(recent, self.high_quantile))
        low = float(torch.quantile(recent, self.low_quantile))
        self.history.append(a)
        return self._keep_current(frame) if (a > high or a < low) else False

    def _extra_state(self) -> dict[str, Any]:
        return {"history": list(self.history)}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self.history = deque((float(a) for a in state["history"]), maxlen=self.window_size)


class UniformSelector(TemporalSelector):
    """The baseline: keep frames evenly, one every ``stride`` frames (``stride`` may be fractional).

    Frame ``i`` is kept when ``floor(i / stride)`` steps up, so ``n`` frames keep about
    ``n / stride`` of them, frame 0 included. :meth:`matching` builds one with a given budget.
    """

    def __init__(self, stride: float = 2.0) -> None:
        super().__init__()
        if not stride >= 1.0 or math.isinf(stride):
            raise ValueError(f"stride must be a finite number >= 1, got {stride!r}")
        self.stride = float(stride)

    @classmethod
    def matching(cls, kept: int, total: int) -> UniformSelector:
        """A uniform selector that keeps ``kept`` of ``total`` frames (the equal-budget baseline)."""
        if not 1 <= kept <= total:
            raise ValueError(f"need 1 <= kept <= total, got kept={kept}, total={total}")
        # Just under total/kept so that the last slot lands inside the series.
        return cls(max(1.0, (total - 1) / max(kept - 1, 1) - 1e-9) if kept > 1 else float(total))

    def _decide(self, frame: Tensor) -> bool:
        if math.floor(self.idx / self.stride) > math.floor((self.idx - 1) / self.stride):
            return self._keep_current(frame)
        return False
