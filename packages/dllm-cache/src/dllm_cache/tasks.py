"""Generated tasks with long prompts and short answers, the regime dLLM-Cache targets.

A prompt states an operation (copy or reverse a digit string), shows ``n_shots`` worked examples
and ends with a query; the answer is the transformed query followed by EOS up to the response
length (LLaDA's SFT pads answers with EOS and trains on them). Token ids::

    0 pad, 1 bos, 2 eos, 3 mask, 4 "->", 5 ";", 6 copy, 7 reverse, 8..17 digits 0-9
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

PAD, BOS, EOS, MASK, ARROW, SEMI = 0, 1, 2, 3, 4, 5
OPS = {"copy": 6, "reverse": 7}
DIGIT0 = 8
VOCAB_SIZE = 18


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """``digits`` per string, ``response_length`` answer tokens (digits then EOS)."""

    digits: int = 4
    response_length: int = 8
    ops: tuple[str, ...] = ("copy", "reverse")

    def prompt_length(self, n_shots: int) -> int:
        return 2 + n_shots * (2 * self.digits + 2) + self.digits + 1

    def shots_for(self, prompt_length: int) -> int:
        """The largest ``n_shots`` whose prompt is at most ``prompt_length`` tokens."""
        return max(0, (prompt_length - 3 - self.digits) // (2 * self.digits + 2))


def _apply(op: Tensor, s: Tensor) -> Tensor:
    return torch.where((op == OPS["reverse"])[:, None], s.flip(-1), s)


def make_batch(
    spec: TaskSpec, batch: int, n_shots: int, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """``(prompts B×P, answers B×R)`` with a random operation per row."""
    if spec.digits > spec.response_length:
        raise ValueError(f"digits={spec.digits} must fit in response_length={spec.response_length}")
    unknown = set(spec.ops) - set(OPS)
    if unknown or not spec.ops:
        raise ValueError(f"ops must be a non-empty subset of {sorted(OPS)}, got {spec.ops!r}")
    codes = torch.tensor([OPS[name] for name in spec.ops])
    op = codes[torch.randint(len(codes), (batch,), generator=generator)]
    parts = [torch.full((batch, 1), BOS), op[:, None]]
    for _ in range(n_shots):
        s = DIGIT0 + torch.randint(10, (batch, spec.digits), generator=generator)
        parts += [s, torch.full((batch, 1), ARROW), _apply(op, s), torch.full((batch, 1), SEMI)]
    query = DIGIT0 + torch.randint(10, (batch, spec.digits), generator=generator)
    parts += [query, torch.full((batch, 1), ARROW)]
    eos = torch.full((batch, spec.response_length - spec.digits), EOS)
    return torch.cat(parts, 1), torch.cat([_apply(op, query), eos], 1)


def exact_match(outputs: Tensor, answers: Tensor, digits: int) -> Tensor:
    """Per row: whether the answer's digits came out right (the EOS tail is not scored)."""
    return (outputs[:, :digits] == answers[:, :digits]).all(1)
