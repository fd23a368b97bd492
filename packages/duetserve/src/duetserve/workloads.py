"""Request traces: generated (Poisson or bursty arrivals, log-normal lengths) or read from a local file.

The presets approximate the public trace statistics the paper evaluates on (means of the published
Azure LLM inference traces and of the Mooncake trace); lengths are log-normal around those means. No
trace is downloaded: :func:`load_trace` reads a local CSV or JSONL file with the columns
``arrival_s, prompt_tokens, output_tokens`` (Azure's ``TIMESTAMP, ContextTokens, GeneratedTokens``
columns are recognised too).
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as _dt
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    """One request: it arrives at ``arrival`` seconds with ``prompt_len`` tokens and generates
    ``output_len`` tokens (the first of them at the end of its prefill)."""

    id: int
    arrival: float
    prompt_len: int
    output_len: int


@dataclasses.dataclass(frozen=True)
class LengthMix:
    """Log-normal prompt and output lengths with the given means and log-space spreads, clipped."""

    prompt_mean: float
    output_mean: float
    prompt_sigma: float = 0.8
    output_sigma: float = 0.8
    max_prompt: int = 16384
    max_output: int = 2048

    def sample(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        def draw(mean: float, sigma: float, top: int) -> np.ndarray:
            mu = np.log(mean) - sigma**2 / 2  # so that E[length] = mean before clipping
            return np.clip(np.rint(rng.lognormal(mu, sigma, n)), 1, top).astype(np.int64)

        return (
            draw(self.prompt_mean, self.prompt_sigma, self.max_prompt),
            draw(self.output_mean, self.output_sigma, self.max_output),
        )


# Means of the public traces (Azure LLM inference 2023, Mooncake); spreads are assumptions.
MIXES: dict[str, LengthMix] = {
    "conversation": LengthMix(prompt_mean=1155, output_mean=211),
    "code": LengthMix(prompt_mean=2048, output_mean=28, output_sigma=1.0),
    "mooncake": LengthMix(prompt_mean=7590, output_mean=182, prompt_sigma=0.7),
    "decode_heavy": LengthMix(prompt_mean=256, output_mean=512, prompt_sigma=0.5, output_sigma=0.5),
    "prefill_heavy": LengthMix(
        prompt_mean=6144, output_mean=64, prompt_sigma=0.5, output_sigma=0.5
    ),
}


def poisson_trace(
    rate: float, n: int, mix: str | LengthMix = "conversation", seed: int = 0
) -> list[Request]:
    """``n`` requests with Poisson arrivals at ``rate`` per second and lengths from ``mix``."""
    if not rate > 0 or n <= 0:
        raise ValueError(f"need rate > 0 and n > 0, got rate={rate}, n={n}")
    rng = np.random.default_rng(seed)
    lengths = _mix(mix).sample(rng, n)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, n))
    return _requests(arrivals, *lengths)


def bursty_trace(
    rate: float,
    n: int,
    mix: str | LengthMix = "conversation",
    *,
    burst_every_s: float = 20.0,
    burst_size: int = 8,
    burst_mix: str | LengthMix = "prefill_heavy",
    seed: int = 0,
) -> list[Request]:
    """A Poisson background at ``rate`` plus, every ``burst_every_s`` seconds, ``burst_size`` long
    prompts arriving together (the subagent-burst pattern users report ITL spikes under)."""
    base = poisson_trace(rate, n, mix, seed)
    horizon = base[-1].arrival
    rng = np.random.default_rng(seed + 1_000_003)
    starts = np.arange(burst_every_s / 2, horizon, burst_every_s)
    if starts.size == 0:
        return base
    times = np.repeat(starts, burst_size) + rng.uniform(0, 0.05, starts.size * burst_size)
    prompts, outputs = _mix(burst_mix).sample(rng, times.size)
    merged = sorted(
        [(r.arrival, r.prompt_len, r.output_len) for r in base]
        + list(zip(times.tolist(), prompts.tolist(), outputs.tolist(), strict=True))
    )
    arr, p, o = (np.array(c) for c in zip(*merged, strict=True))
    return _requests(arr, p, o)


def shifting_trace(
    rate: float,
    n: int,
    phases: Sequence[str | LengthMix] = ("decode_heavy", "prefill_heavy"),
    seed: int = 0,
) -> list[Request]:
    """Poisson arrivals whose length mix changes phase by phase (equal numbers of requests each)."""
    if not phases:
        raise ValueError("phases must name at least one length mix")
    rng = np.random.default_rng(seed)
    sizes = np.diff(np.linspace(0, n, len(phases) + 1).round().astype(int))
    prompts, outputs = [], []
    for phase, size in zip(phases, sizes, strict=True):
        p, o = _mix(phase).sample(rng, int(size))
        prompts.append(p)
        outputs.append(o)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, n))
    return _requests(arrivals, np.concatenate(prompts), np.concatenate(outputs))


def scale_rate(trace: Sequence[Request], factor: float) -> list[Request]:
    """The same requests with arrival times divided by ``factor`` (rate times ``factor``): common
    random numbers for a search over the request rate."""
    if not factor > 0:
        raise ValueError(f"factor must be > 0, got {factor}")
    return [dataclasses.replace(r, arrival=r.arrival / factor) for r in trace]


def validate_trace(trace: Sequence[Request]) -> None:
    """Raise ``ValueError`` on non-positive lengths, negative or decreasing arrival times."""
    last = 0.0
    for i, r in enumerate(trace):
        if r.prompt_len <= 0 or r.output_len <= 0:
            raise ValueError(
                f"request {i} (id {r.id}) has prompt_len={r.prompt_len}, output_len={r.output_len}; "
                "both must be >= 1"
            )
        if not np.isfinite(r.arrival) or r.arrival < last:
            raise ValueError(
                f"request {i} (id {r.id}) arrives at {r.arrival} s, before the previous one at "
                f"{last} s; arrival times must be finite, >= 0 and non-decreasing"
            )
        last = r.arrival


_COLUMNS = {
    "arrival": ("arrival_s", "arrival", "timestamp"),
    "prompt": ("prompt_tokens", "prompt_len", "contexttokens", "input_length"),
    "output": ("output_tokens", "output_len", "generatedtokens", "output_length"),
}


def load_trace(path: str | Path, *, time_scale: float = 1.0) -> list[Request]:
    """Read a local CSV or JSONL trace; timestamps (seconds or ISO dates) are shifted to start at 0
    and multiplied by ``time_scale``. Validated like :func:`validate_trace`."""
    path = Path(path)
    if path.suffix in (".jsonl", ".json"):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    else:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
    if not rows:
        raise ValueError(f"{path}: no requests")
    keys = {k.lower().strip(): k for k in rows[0]}
    cols = {}
    for role, names in _COLUMNS.items():
        found = next((keys[n] for n in names if n in keys), None)
        if found is None:
            raise ValueError(
                f"{path}: no {role} column; expected one of {names}, got {list(rows[0])}"
            )
        cols[role] = found
    times = np.array([_seconds(r[cols["arrival"]]) for r in rows], dtype=np.float64)
    # Checked before the shift to 0, so that the message shows the file's own timestamps.
    bad = np.flatnonzero(~np.isfinite(times) | (times < np.maximum.accumulate(times)))
    if bad.size:
        i = int(bad[0])
        prev = f", before the previous row's {rows[i - 1][cols['arrival']]!r}" if i else ""
        raise ValueError(
            f"{path}: row {i + 1} has {cols['arrival']}={rows[i][cols['arrival']]!r}{prev}; "
            "timestamps must be finite and non-decreasing"
        )
    arrivals = (times - times[0]) * time_scale
    prompts = np.array([int(r[cols["prompt"]]) for r in rows])
    outputs = np.array([int(r[cols["output"]]) for r in rows])
    trace = [
        Request(i, float(a), int(p), int(o))
        for i, (a, p, o) in enumerate(zip(arrivals, prompts, outputs, strict=True))
    ]
    validate_trace(trace)
    return trace


def _seconds(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return _dt.datetime.fromisoformat(str(value).strip()).timestamp()


def _mix(mix: str | LengthMix) -> LengthMix:
    if isinstance(mix, LengthMix):
        return mix
    try:
        return MIXES[mix]
    except KeyError:
        raise ValueError(f"unknown length mix {mix!r}; expected one of {sorted(MIXES)}") from None


def _requests(arrivals: np.ndarray, prompts: np.ndarray, outputs: np.ndarray) -> list[Request]:
    return [
        Request(i, float(a), int(p), int(o))
        for i, (a, p, o) in enumerate(zip(arrivals, prompts, outputs, strict=True))
    ]
