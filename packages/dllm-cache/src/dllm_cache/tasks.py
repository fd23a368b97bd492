"""Generated tasks with long prompts and short answers, the regime dLLM-Cache targets.

A prompt states an operation, shows ``n_shots`` worked examples and ends with a query; the answer
is the transformed query followed by EOS up to the response length (LLaDA's SFT pads answers with
EOS and trains on them). Operations:

- ``copy`` / ``reverse``: the query is one digit string ``s ->``; the answer is ``s`` or its reverse.
  Every answer digit is fixed by the prompt, so decoding order never matters.
- ``pick``: the query holds two strings ``a ; b ->`` (one over the digits 0-4, the other over 5-9)
  and the answer is ``a`` or ``b`` by a coin flip. Answer digits depend on each other (the first committed digit decides which string the
  rest must follow), so decoding all positions in one step mixes the two strings while
  step-by-step decoding does not: a task that needs iterative refinement.

Token ids::

    0 pad, 1 bos, 2 eos, 3 mask, 4 "->", 5 ";", 6 copy, 7 reverse, 8..17 digits 0-9, 18 pick
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

PAD, BOS, EOS, MASK, ARROW, SEMI = 0, 1, 2, 3, 4, 5
OPS = {"copy": 6, "reverse": 7, "pick": 18}
DIGIT0 = 8
VOCAB_SIZE = 19


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """``digits`` per string, ``response_length`` answer tokens (digits then EOS)."""

    digits: int = 4
    response_length: int = 8
    ops: tuple[str, ...] = ("copy", "reverse")

    @property
    def pick(self) -> bool:
        """Whether this is the two-string ``pick`` task (it cannot mix with copy/reverse)."""
        return "pick" in self.ops

    def _query_length(self) -> int:
        return (2 * self.digits + 2) if self.pick else (self.digits + 1)

    def _shot_length(self) -> int:
        return self._query_length() + self.digits + 1

    def prompt_length(self, n_shots: int) -> int:
        return 2 + n_shots * self._shot_length() + self._query_length()

    def shots_for(self, prompt_length: int) -> int:
        """The largest ``n_shots`` whose prompt is at most ``prompt_length`` tokens."""
        return max(0, (prompt_length - 2 - self._query_length()) // self._shot_length())


def _apply(op: Tensor, s: Tensor) -> Tensor:
    return torch.where((op == OPS["reverse"])[:, None], s.flip(-1), s)


def _pick_example(
    digits: int, batch: int, generator: torch.Generator
) -> tuple[list[Tensor], Tensor]:
    """The ``a ; b ->`` query tokens and the coin-flipped answer ``a`` or ``b``.

    One string is drawn from the digits 0-4 and the other from 5-9 (which comes first is random),
    so one committed answer digit tells which string the answer follows: the dependency a small
    model learns within CPU minutes (with strings over all ten digits it stays at the per-digit
    marginals for over 1000 steps).
    """
    a = DIGIT0 + torch.randint(5, (batch, digits), generator=generator)
    b = DIGIT0 + 5 + torch.randint(5, (batch, digits), generator=generator)
    swap = torch.rand(batch, 1, generator=generator) < 0.5
    a, b = torch.where(swap, b, a), torch.where(swap, a, b)
    first = torch.rand(batch, 1, generator=generator) < 0.5
    query = [a, torch.full((batch, 1), SEMI), b, torch.full((batch, 1), ARROW)]
    return query, torch.where(first, a, b)


def make_batch(
    spec: TaskSpec, batch: int, n_shots: int, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """``(prompts B×P, answers B×R)`` with a random operation per row."""
    if spec.digits > spec.response_length:
        raise ValueError(f"digits={spec.digits} must fit in response_length={spec.response_length}")
    unknown = set(spec.ops) - set(OPS)
    if unknown or not spec.ops:
        raise ValueError(f"ops must be a non-empty subset of {sorted(OPS)}, got {spec.ops!r}")
    if spec.pick and len(spec.ops) > 1:
        raise ValueError(
            f"'pick' has its own prompt layout and cannot mix with others: {spec.ops!r}"
        )
    eos = torch.full((batch, spec.response_length - spec.digits), EOS)
    if spec.pick:
        parts = [torch.full((batch, 1), BOS), torch.full((batch, 1), OPS["pick"])]
        for _ in range(n_shots):
            shown, answer = _pick_example(spec.digits, batch, generator)
            parts += [*shown, answer, torch.full((batch, 1), SEMI)]
        shown, answer = _pick_example(spec.digits, batch, generator)
        return torch.cat([*parts, *shown], 1), torch.cat([answer, eos], 1)
    codes = torch.tensor([OPS[name] for name in spec.ops])
    op = codes[torch.randint(len(codes), (batch,), generator=generator)]
    parts = [torch.full((batch, 1), BOS), op[:, None]]
    for _ in range(n_shots):
        s = DIGIT0 + torch.randint(10, (batch, spec.digits), generator=generator)
        parts += [s, torch.full((batch, 1), ARROW), _apply(op, s), torch.full((batch, 1), SEMI)]
    query = DIGIT0 + torch.randint(10, (batch, spec.digits), generator=generator)
    parts += [query, torch.full((batch, 1), ARROW)]
    return torch.cat(parts, 1), torch.cat([_apply(op, query), eos], 1)


def exact_match(outputs: Tensor, answers: Tensor, digits: int) -> Tensor:
    """Per row: whether the answer's digits came out right (the EOS tail is not scored)."""
    return (outputs[:, :digits] == answers[:, :digits]).all(1)


def _pick_strings(prompts: Tensor, digits: int) -> tuple[Tensor, Tensor]:
    return prompts[:, -(2 * digits + 2) : -(digits + 2)], prompts[:, -(digits + 1) : -1]


def digits_right(spec: TaskSpec, outputs: Tensor, prompts: Tensor, answers: Tensor) -> Tensor:
    """Per row: the fraction of answer digits right; for ``pick``, against the closer string."""
    out = outputs[:, : spec.digits]
    if not spec.pick:
        return (out == answers[:, : spec.digits]).float().mean(1)
    a, b = _pick_strings(prompts, spec.digits)
    return torch.maximum((out == a).float().mean(1), (out == b).float().mean(1))


def solved(spec: TaskSpec, outputs: Tensor, prompts: Tensor, answers: Tensor) -> Tensor:
    """Per row: exact match, or for ``pick`` whether the answer is one of the two strings."""
    if spec.pick:
        return pick_valid(outputs, prompts, spec.digits)
    return exact_match(outputs, answers, spec.digits)


def pick_valid(outputs: Tensor, prompts: Tensor, digits: int) -> Tensor:
    """Per row of a ``pick`` batch: whether the answer is exactly one of the query's two strings.

    Either string is a correct answer (the coin flip is not in the prompt); a one-step decode that
    mixes digits of both is not.
    """
    a, b = _pick_strings(prompts, digits)
    out = outputs[:, :digits]
    return (out == a).all(1) | (out == b).all(1)
