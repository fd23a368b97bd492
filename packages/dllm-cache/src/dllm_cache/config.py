"""The cache settings: one dataclass, validated on construction."""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

Selection = Literal["value", "key", "attn_out", "random"]
SELECTIONS: tuple[str, ...] = ("value", "key", "attn_out", "random")


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
    """

    prompt_interval: int = 100
    response_interval: int = 7
    transfer_ratio: float | None = 0.25
    cfg_interval: int = 1
    selection: Selection = "value"
    refresh_first_layer: bool = True
    seed: int = 0

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


#: Settings of the official scripts (spec §2.3), as ``(gen_length, steps, block_length, config)``.
PRESETS: dict[str, tuple[int, int, int, DLLMCacheConfig]] = {
    "llada-instruct-demo": (256, 256, 8, DLLMCacheConfig(100, 7, 0.25)),
    "llada-base-gsm8k": (256, 256, 256, DLLMCacheConfig(100, 6, 0.25)),
    "llada-instruct-gsm8k": (256, 256, 8, DLLMCacheConfig(50, 7, 0.25)),
    "llada-instruct-longbench-hotpotqa": (32, 32, 32, DLLMCacheConfig(100, 8, 0.25)),
    "llada-instruct-humaneval": (512, 512, 32, DLLMCacheConfig(50, 8, 0.25)),
    "llada-base-mbpp": (256, 256, 32, DLLMCacheConfig(50, 4, 0.25)),
    "llada-bbh": (256, 256, 256, DLLMCacheConfig(50, 6, 0.25)),
    "llada-base-gpqa": (256, 256, 256, DLLMCacheConfig(100, 8, 0.25)),
    "dream-base-gsm8k-cot": (256, 256, 256, DLLMCacheConfig(100, 8, 0.25)),
    "dream-instruct-minerva-math": (256, 256, 256, DLLMCacheConfig(50, 1, 0.25)),
}
