"""SM partitions on a real GPU: ``torch.cuda.green_contexts`` behind one small object.

DuetServe runs decode and prefill on two streams confined to disjoint SM sets. The paper masks TPCs
with libsmctrl; PyTorch's green contexts (CUDA >= 12.4 driver API) are the supported way today.
Three traps this module handles:

* the API moved: torch 2.10/2.11 ``GreenContext.create(num_sms, device_id)`` and streams made under
  ``set_context()``; torch 2.13+ keyword-only ``create(*, num_sms=..., device_id=...)`` and
  ``ctx.Stream()``. Both are called with keywords, and a stream is made whichever way exists;
* the driver rounds a request to the architecture's granularity (flashinfer's table: minimum and
  alignment of 1/1 SMs on compute capability 6.x, 2/2 on 7.x, 4/2 on 8.x, 8/8 on 9.x and later), so
  the granted count is computed before asking, and checked after;
* separate ``create()`` calls split the device independently and can hand out overlapping SMs
  (pytorch/pytorch#195378): :meth:`SMPartitioner.observed_sms` runs a probe kernel that records
  ``%smid`` per block on a stream, and :meth:`SMPartitioner.partition` checks the two sets are
  disjoint (``strict=True`` raises, else warns).

Everything here needs a CUDA build of torch; on a CPU build :class:`SMPartitioner` raises
``RuntimeError`` with the remedy, and the rest of the package works without it.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

REMEDY = (
    "SM partitioning needs a CUDA build of PyTorch (2.10 or later) with green-context support, an "
    "NVIDIA GPU of compute capability >= 6.0 and a driver for CUDA >= 12.4; install the CUDA wheel, "
    "e.g. `pip install torch --index-url https://download.pytorch.org/whl/cu128`. Without a GPU, "
    "evaluate policies with duetserve.simulate, which needs none."
)


def sm_constraint(major: int, minor: int = 0) -> tuple[int, int]:
    """``(minimum, alignment)`` of a green-context SM count on compute capability ``major.minor``
    (the rules flashinfer's green-context helpers encode)."""
    if major == 6:
        return 1, 1
    if major == 7:
        return 2, 2
    if major == 8:
        return 4, 2
    if major >= 9:
        return 8, 8
    raise ValueError(f"green contexts need compute capability >= 6.0, got {major}.{minor}")


def granted_sms(requested: int, capability: tuple[int, int], total: int) -> int:
    """What the driver grants for ``requested`` SMs: rounded up to the alignment, at least the
    minimum. Raises ``ValueError`` naming the granted count when it exceeds ``total``."""
    if isinstance(requested, bool) or not isinstance(requested, int) or requested <= 0:
        raise ValueError(f"requested SM count must be a positive integer, got {requested!r}")
    minimum, align = sm_constraint(*capability)
    granted = max(minimum, -(-requested // align) * align)
    if granted > total:
        raise ValueError(
            f"{requested} SMs round to {granted} on compute capability {capability[0]}."
            f"{capability[1]} (minimum {minimum}, alignment {align}), more than the {total} the "
            "device has"
        )
    return granted


def split_sms(n_decode: int, capability: tuple[int, int], total: int) -> tuple[int, int]:
    """The granted (decode, prefill) SM counts for a decode request of ``n_decode`` SMs: the prefill
    side gets the rest, rounded *down* to the alignment so the two never add up past ``total``."""
    decode = granted_sms(n_decode, capability, total)
    minimum, align = sm_constraint(*capability)
    prefill = (total - decode) // align * align
    if prefill < minimum:
        raise ValueError(
            f"a decode partition of {decode} SMs (granted for {n_decode}) leaves {total - decode} "
            f"of {total}, below the {minimum}-SM minimum of a prefill partition"
        )
    return decode, prefill


def green_contexts_available() -> tuple[bool, str]:
    """Whether green contexts can be created here, and why not."""
    try:
        import torch
    except ModuleNotFoundError:
        return False, "torch is not installed"
    gc = getattr(torch.cuda, "green_contexts", None)
    if gc is None:
        return False, f"torch {torch.__version__} has no torch.cuda.green_contexts (needs >= 2.10)"
    if not getattr(gc, "SUPPORTED", False):
        return False, f"torch {torch.__version__} was not built with green-context support"
    if not torch.cuda.is_available():
        return False, "no CUDA device is visible"
    return True, ""


@dataclasses.dataclass
class Partition:
    """Two streams on disjoint SM sets: ``decode_stream`` on ``decode_sms`` SMs, ``prefill_stream``
    on ``prefill_sms``; ``observed`` holds the SM ids the probe saw on each (when checked)."""

    decode_stream: Any
    prefill_stream: Any
    decode_sms: int
    prefill_sms: int
    contexts: tuple[Any, Any]
    observed: tuple[frozenset[int], frozenset[int]] | None = None


class SMPartitioner:
    """Create decode/prefill stream pairs over green contexts on one CUDA device.

    >>> part = SMPartitioner()                       # doctest: +SKIP
    >>> p = part.partition(n_decode_sms=32)          # doctest: +SKIP
    >>> with torch.cuda.stream(p.decode_stream): ...  # doctest: +SKIP
    """

    def __init__(self, device: int | None = None, *, strict: bool = True) -> None:
        ok, why = green_contexts_available()
        if not ok:
            raise RuntimeError(f"green contexts are unavailable: {why}. {REMEDY}")
        import torch

        self.torch = torch
        self.device = torch.cuda.current_device() if device is None else device
        props = torch.cuda.get_device_properties(self.device)
        self.total_sms = int(props.multi_processor_count)
        self.capability = (int(props.major), int(props.minor))
        self.strict = strict
        self._cache: dict[int, Partition] = {}

    def _context(self, n_sms: int) -> Any:
        gc = self.torch.cuda.green_contexts.GreenContext
        return gc.create(num_sms=n_sms, device_id=self.device)

    def _stream(self, ctx: Any) -> Any:
        if hasattr(ctx, "Stream"):  # torch >= 2.13
            return ctx.Stream()
        ctx.set_context()  # torch 2.10/2.11: a stream made inside the context belongs to it
        try:
            return self.torch.cuda.Stream(device=self.device)
        finally:
            ctx.pop_context()

    def partition(self, n_decode_sms: int, *, check: bool = True) -> Partition:
        """Streams for a decode partition of (the granted rounding of) ``n_decode_sms`` SMs and a
        prefill partition of the rest; cached per granted size. ``check`` probes the SMs each stream
        runs on and verifies the counts and disjointness."""
        decode, prefill = split_sms(n_decode_sms, self.capability, self.total_sms)
        if decode in self._cache:
            return self._cache[decode]
        ctx_d, ctx_p = self._context(decode), self._context(prefill)
        part = Partition(self._stream(ctx_d), self._stream(ctx_p), decode, prefill, (ctx_d, ctx_p))
        if check:
            seen_d, seen_p = (
                self.observed_sms(part.decode_stream),
                self.observed_sms(part.prefill_stream),
            )
            part.observed = (seen_d, seen_p)
            problems = []
            if len(seen_d) > decode or len(seen_p) > prefill:
                problems.append(
                    f"streams ran on {len(seen_d)} and {len(seen_p)} SMs, more than the granted "
                    f"{decode} and {prefill}"
                )
            if seen_d & seen_p:
                problems.append(
                    f"the partitions share SMs {sorted(seen_d & seen_p)[:8]}... (separate create() "
                    "calls can overlap: pytorch/pytorch#195378)"
                )
            if problems:
                msg = "; ".join(problems)
                if self.strict:
                    raise RuntimeError(f"green-context partition check failed: {msg}")
                warnings.warn(msg, RuntimeWarning, stacklevel=2)
        self._cache[decode] = part
        return part

    def observed_sms(self, stream: Any, blocks: int | None = None) -> frozenset[int]:
        """SM ids that blocks of a probe kernel ran on when launched on ``stream`` (Triton reads
        ``%smid``). Launch many more blocks than SMs so every SM the stream may use gets some."""
        from duetserve._smid import probe_smids

        n = blocks or 64 * self.total_sms
        with self.torch.cuda.stream(stream):
            ids = probe_smids(n, self.device)
        stream.synchronize()
        return frozenset(int(i) for i in ids.unique().tolist())
