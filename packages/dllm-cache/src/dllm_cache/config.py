"""The cache settings: one dataclass, validated on construction."""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

Selection = Literal["value", "key", "attn_out", "random"]
SELECTIONS: tuple[str, ...] = ("value", "key", "attn_out", "random")
Padding = Literal["model", "mask", "ignore"]
PADDINGS: tuple[str, ...] = ("model", "mask", "ignore")


@dataclasses.dataclass(frozen=True)
class DLLMCacheConfig:
    """Settings of dLLM-Cache (defaults: the official LLaDA-Instruct demo).

    prompt_interval:
        ``Kp``: the prompt features of every layer are recomputed on forward calls
        ``t`` with ``(t - 1) % Kp == 0``.
    response_interval:
        ``Kr``: the same for the response features.
    transfer_ratio:
        ``ρ`` in ``[0, 1]``: between response refreshes, the ``floor(R ρ)`` response tokens
        whose probe feature changed most are recomputed in every layer. ``0`` (or ``None``)
        turns the adaptive update off.
    cfg_interval:
        Classifier-free guidance: the unconditional branch (and with it the cached residual
        ``cond - uncond``) is recomputed on sampler steps ``t`` with ``(t - 1) % K_cfg == 0``
        or ``t <= 5``; ``1`` recomputes it every step.
    selection:
        The probe feature ranked by cosine change: ``"value"`` (the paper's V-verify),
        or the ablations ``"key"``, ``"attn_out"`` (attention-branch output) and ``"random"``
        (same cost as ``"value"``, uniformly random rows).
    refresh_first_layer:
        Recompute layer 0 in full at every call (the official code does; the paper does
        not say so, maomaocun/dLLM-cache#6).
    seed:
        Seed of the generator behind ``selection="random"``.
    padding:
        How the cached attention treats left padding: ``"model"`` (default) does what the
        model's own forward does, so a cached run can equal an uncached one: LLaDA's remote
        code calls SDPA with ``attn_mask=None`` and attends to padding, TinyLLaDA, Llama and
        Dream hide it (see :meth:`~dllm_cache.adapters.BlockAdapter.honours_padding`);
        ``"mask"`` always hides padding keys; ``"ignore"`` always attends to them.
    """

    prompt_interval: int = 100
    response_interval: int = 7
    transfer_ratio: float | None = 0.25
    cfg_interval: int = 1
    selection: Selection = "value"
    refresh_first_layer: bool = True
    seed: int = 0
    padding: Padding = "model"

    def __post_init__(self) -> None:
        for name in ("prompt_interval", "response_interval", "cfg_interval"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"{name} must be an int >= 1 (1 recomputes every step), got {value!r}; "
                    "the official scripts' -1 for 'off' is not accepted"
                )
        rho = self.transfer_ratio
        if rho is not None and (
            isinstance(rho, bool)
            or not isinstance(rho, (int, float))
            or math.isnan(rho)
            or not 0 <= rho <= 1
        ):
            raise ValueError(f"transfer_ratio must be in [0, 1] or None (off), got {rho!r}")
        if self.selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {SELECTIONS}, got {self.selection!r}")
        if self.padding not in PADDINGS:
            raise ValueError(f"padding must be one of {PADDINGS}, got {self.padding!r}")

    @property
    def adaptive(self) -> bool:
        """Whether the adaptive partial update runs (``0 < ρ <= 1``)."""
        return self.transfer_ratio is not None and self.transfer_ratio > 0

    def tokens_per_update(self, response_length: int) -> int:
        """``floor(R ρ)``: response rows recomputed per adaptive update (0 when off)."""
        if self.transfer_ratio is None or not self.adaptive:
            return 0
        # int(R * ρ), as the official code computes it.
        return int(response_length * float(self.transfer_ratio))


def _official_interval(name: str, value: int) -> int:
    # The official refresh test is ``(t - 1) % interval == 0``; with -1 that holds on every step
    # (Python's modulo by -1 is 0), so -1 recomputes every step: caching of that segment is off.
    if value == -1:
        return 1
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1 or -1 (recompute every step), got {value!r}")
    return value


def dLLMCacheConfig(  # the official class name, kept for drop-in use
    prompt_interval_steps: int = 1,
    gen_interval_steps: int = 1,
    transfer_ratio: float = 0.0,
    cfg_interval_steps: int = 1,
) -> DLLMCacheConfig:
    """The official ``dLLMCacheConfig`` (same names, order and defaults) as a :class:`DLLMCacheConfig`.

    ``-1`` for an interval is accepted as in the official scripts and means "recompute every
    step" (``(t - 1) % -1 == 0`` always holds).
    """
    return DLLMCacheConfig(
        prompt_interval=_official_interval("prompt_interval_steps", prompt_interval_steps),
        response_interval=_official_interval("gen_interval_steps", gen_interval_steps),
        transfer_ratio=transfer_ratio,
        cfg_interval=_official_interval("cfg_interval_steps", cfg_interval_steps),
    )


@dataclasses.dataclass(frozen=True)
class Preset:
    """One official script's settings (spec §2.3): sampler arguments and the cache config.

    ``generate_kwargs()`` gives the sampler's ``gen_length``/``steps``/``block_length`` (and, for
    Dream, ``temperature``/``top_p``/``alg``) by name.
    """

    gen_length: int
    steps: int
    block_length: int
    config: DLLMCacheConfig
    sampler: Literal["llada", "dream"] = "llada"
    temperature: float = 0.0
    top_p: float | None = None
    alg: str | None = None

    def generate_kwargs(self) -> dict[str, object]:
        if self.sampler == "dream":
            out: dict[str, object] = {"max_new_tokens": self.gen_length, "steps": self.steps,
                                      "temperature": self.temperature}  # fmt: skip
            if self.top_p is not None:
                out["top_p"] = self.top_p
            if self.alg is not None:
                out["alg"] = self.alg
            return out
        return {"gen_length": self.gen_length, "steps": self.steps,
                "block_length": self.block_length}  # fmt: skip


#: Settings of the official scripts (spec §2.3), by name: ``PRESETS[name].config``,
#: ``PRESETS[name].generate_kwargs()``.
PRESETS: dict[str, Preset] = {
    "llada-instruct-demo": Preset(256, 256, 8, DLLMCacheConfig(100, 7, 0.25)),
    "llada-base-gsm8k": Preset(256, 256, 256, DLLMCacheConfig(100, 6, 0.25)),
    "llada-instruct-gsm8k": Preset(256, 256, 8, DLLMCacheConfig(50, 7, 0.25)),
    "llada-instruct-longbench-hotpotqa": Preset(32, 32, 32, DLLMCacheConfig(100, 8, 0.25)),
    "llada-instruct-humaneval": Preset(512, 512, 32, DLLMCacheConfig(50, 8, 0.25)),
    "llada-base-mbpp": Preset(256, 256, 32, DLLMCacheConfig(50, 4, 0.25)),
    "llada-bbh": Preset(256, 256, 256, DLLMCacheConfig(50, 6, 0.25)),
    "llada-base-gpqa": Preset(256, 256, 256, DLLMCacheConfig(100, 8, 0.25)),
    "dream-base-gsm8k-cot": Preset(
        256, 256, 256, DLLMCacheConfig(100, 8, 0.25), "dream", 0.2, 0.95, "entropy"
    ),
    "dream-instruct-minerva-math": Preset(
        256, 256, 256, DLLMCacheConfig(50, 1, 0.25), "dream", 0.0, None, "entropy"
    ),
}
