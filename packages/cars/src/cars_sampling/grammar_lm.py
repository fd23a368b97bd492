"""A tiny Llama that knows the in-repo grammars imperfectly: the neural LM of the efficiency study.

The paper prompts instruction-tuned LLMs that put part of their mass on valid programs and part on
near misses. At CPU scale we get the same regime by training shared-core's tiny Llama on the
grammars' strings, a share of them corrupted by one random character edit, each after its grammar's
prompt. Training is deterministic and cached by shared-core (``train_tiny_lm``).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import torch

from cars_sampling.grammars import GRAMMARS
from cars_sampling.regex import random_string

_PRINTABLE = [chr(c) for c in range(32, 127)]


def corrupt(text: str, rng: np.random.Generator) -> str:
    """One random character deletion, insertion or substitution."""
    i = int(rng.integers(len(text) + 1))
    op = int(rng.integers(3))
    ch = _PRINTABLE[int(rng.integers(len(_PRINTABLE)))]
    if op == 0 and i < len(text):
        return text[:i] + text[i + 1 :]
    if op == 1:
        return text[:i] + ch + text[i:]
    return text[:i] + ch + text[i + 1 :]


def training_sequences(
    tokenizer: Any, *, per_grammar: int = 1500, corruption: float = 0.3, seed: int = 0
) -> list[list[int]]:
    """``BOS prompt string EOS`` token sequences for every grammar, ``corruption`` of them edited."""
    rng = np.random.default_rng(seed)
    out = []
    for grammar in GRAMMARS.values():
        prompt = tokenizer(grammar.prompt, add_special_tokens=False)["input_ids"]
        for _ in range(per_grammar):
            text = random_string(grammar.regex, rng)
            if rng.random() < corruption:
                text = corrupt(text, rng)
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            out.append([tokenizer.bos_token_id, *prompt, *ids, tokenizer.eos_token_id])
    return out


class _PackedBatches:
    """A shared-core ``BatchFn``: rows of randomly chosen sequences packed end to end."""

    def __init__(self, sequences: list[list[int]]) -> None:
        self.sequences = sequences

    def __call__(self, generator: torch.Generator, batch_size: int, seq_len: int) -> torch.Tensor:
        rows = []
        for _ in range(batch_size):
            row: list[int] = []
            while len(row) < seq_len:
                pick = int(torch.randint(len(self.sequences), (1,), generator=generator))
                row.extend(self.sequences[pick])
            rows.append(row[:seq_len])
        return torch.tensor(rows, dtype=torch.long)


def grammar_lm(
    *, steps: int = 400, seed: int = 0, corruption: float = 0.3, vocab_size: int = 512
) -> tuple[Any, Any]:
    """``(model, tokenizer)``: shared-core's BPE and a tiny Llama trained on the grammars (cached)."""
    from shared_core.data import bpe_tokenizer
    from shared_core.models import train_tiny_lm

    tokenizer = bpe_tokenizer(vocab_size)
    sequences = training_sequences(tokenizer, corruption=corruption, seed=seed)
    digest = hashlib.sha256(repr(sequences).encode()).hexdigest()[:12]
    trained = train_tiny_lm(
        _PackedBatches(sequences),
        steps=steps,
        seed=seed,
        vocab_size=len(tokenizer),
        task_name=f"cars-grammars-{digest}",
        batch_size=32,
        seq_len=128,
    )
    return trained.model.eval(), tokenizer
