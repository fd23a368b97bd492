"""Language models as the sampler sees them: a function from a token prefix to next-token log-probs.

:class:`NextTokenLM` is the protocol; :class:`ToyLM` is an explicit, enumerable LM for tests and the
exactness reproduction (a seeded categorical per prefix). The transformers adapter lives in
:mod:`cars_sampling.transformers_lm`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import torch


@runtime_checkable
class NextTokenLM(Protocol):
    """Anything that gives ``log P(· | prefix)`` over a fixed vocabulary."""

    vocab_size: int

    def logprobs(self, prefix_ids: Sequence[int]) -> torch.Tensor:
        """Log-probabilities ``[vocab_size]`` of the next token after ``prefix_ids`` (prompt included)."""


class ToyLM:
    """An explicit LM: each prefix gets its own categorical, drawn from a hash of (seed, prefix).

    Logits are Gaussian with standard deviation ``sharpness``; ``eos_bias`` is added to the EOS
    logit so strings end at a controllable rate. Deterministic across runs and processes, so the
    exact constrained distribution can be enumerated (:func:`cars_sampling.exact.exact_distribution`).
    """

    def __init__(
        self,
        vocab_size: int,
        eos_token_id: int,
        *,
        seed: int = 0,
        sharpness: float = 1.5,
        eos_bias: float = 0.0,
    ) -> None:
        if vocab_size < 2:
            raise ValueError(f"vocab_size must be >= 2 (a token and EOS), got {vocab_size}")
        if not 0 <= eos_token_id < vocab_size:
            raise ValueError(f"eos_token_id={eos_token_id} is not in [0, {vocab_size})")
        self.vocab_size = vocab_size
        self.eos_token_id = eos_token_id
        self.seed = seed
        self.sharpness = sharpness
        self.eos_bias = eos_bias
        self.calls = 0
        self._memo: dict[tuple[int, ...], torch.Tensor] = {}

    def logprobs(self, prefix_ids: Sequence[int]) -> torch.Tensor:
        self.calls += 1
        prefix = tuple(int(t) for t in prefix_ids)
        cached = self._memo.get(prefix)
        if cached is None:
            key = hashlib.sha256(repr((self.seed, prefix)).encode()).digest()
            rng = np.random.default_rng(int.from_bytes(key[:8], "little"))
            logits = torch.from_numpy(rng.normal(0.0, self.sharpness, self.vocab_size))
            logits[self.eos_token_id] += self.eos_bias
            cached = torch.log_softmax(logits, dim=-1).to(torch.float32)
            self._memo[prefix] = cached
        return cached.clone()
