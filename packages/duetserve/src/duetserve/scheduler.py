"""The DuetServe scheduling policy: decode-first mixed batches under a token budget, then a plan.

Each step takes every running decode (one token each), then prefill chunks, continuing requests first
and then waiting ones first-come-first-served, until the token budget is spent (Sarathi-Serve/vLLM
chunked prefill). The :class:`~duetserve.optimizer.PartitionOptimizer` then decides aggregated or
spatial execution; a fallback plan's prefill cap shortens the chunks. In spatial mode each decode needs
up to ``lookahead - 1`` KV slots beyond its next token; when the free KV cache cannot hold them the
look-ahead is reduced and a :class:`LookaheadReducedWarning` says so.

The policy is engine-agnostic: the simulator drives it, and the vLLM integration applies its plan.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence

from duetserve.optimizer import PartitionOptimizer, PartitionPlan
from duetserve.roofline import Seq
from duetserve.workloads import Request


class LookaheadReducedWarning(UserWarning):
    """The KV cache could not hold ``k`` slots ahead for every decode; ``k`` was reduced."""


@dataclasses.dataclass(eq=False)
class RequestState:
    """A request inside the engine: ``prefilled`` prompt tokens have KV, ``generated`` tokens exist
    (the first comes with the end of the prefill)."""

    request: Request
    prefilled: int = 0
    generated: int = 0

    @property
    def in_prefill(self) -> bool:
        return self.prefilled < self.request.prompt_len

    @property
    def context(self) -> int:
        """Tokens with KV in the cache: the prompt so far, plus generated tokens but the newest."""
        return self.prefilled + max(self.generated - 1, 0)

    @property
    def finished(self) -> bool:
        return self.generated >= self.request.output_len

    @property
    def kv_reserved(self) -> int:
        """KV slots this request holds once admitted: its whole prompt and output."""
        return self.request.prompt_len + self.request.output_len


@dataclasses.dataclass
class Batch:
    """One iteration's work: ``decodes`` (one token each, ``lookahead`` in a spatial window) and
    ``prefills`` as ``(state, chunk_tokens)``; ``admitted`` are waiting requests it starts."""

    decodes: list[RequestState]
    prefills: list[tuple[RequestState, int]]
    admitted: list[RequestState]

    def decode_seqs(self) -> list[Seq]:
        return [Seq(r.context, 1) for r in self.decodes]

    def prefill_seqs(self) -> list[Seq]:
        return [Seq(r.prefilled, q) for r, q in self.prefills]

    @property
    def num_tokens(self) -> int:
        return len(self.decodes) + sum(q for _, q in self.prefills)


class DuetScheduler:
    """Build decode-first mixed batches under ``token_budget`` and plan each with ``optimizer``.

    ``max_num_seqs`` caps the running requests (vLLM's ``max_num_seqs``). ``kv_capacity_tokens``
    (default: unbounded) is the KV cache size in tokens; a request is admitted only when its whole
    prompt and output fit (no preemption), and look-ahead slots come from what is left.
    """

    def __init__(
        self,
        optimizer: PartitionOptimizer,
        token_budget: int = 8192,
        *,
        max_num_seqs: int = 256,
        kv_capacity_tokens: int | None = None,
    ) -> None:
        if isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget <= 0:
            raise ValueError(f"token_budget must be a positive integer, got {token_budget!r}")
        if max_num_seqs <= 0:
            raise ValueError(f"max_num_seqs must be > 0, got {max_num_seqs}")
        if kv_capacity_tokens is not None and kv_capacity_tokens <= 0:
            raise ValueError(f"kv_capacity_tokens must be > 0, got {kv_capacity_tokens}")
        self.optimizer = optimizer
        self.token_budget = token_budget
        self.max_num_seqs = max_num_seqs
        self.kv_capacity_tokens = kv_capacity_tokens
        self.lookahead_reductions = 0

    def build_batch(
        self, waiting: Sequence[RequestState], running: Sequence[RequestState], kv_free: float
    ) -> Batch:
        """The decode-first mixed batch; admits waiting requests while their KV and the budget fit."""
        decodes = [r for r in running if not r.in_prefill][: self.token_budget]
        left = self.token_budget - len(decodes)
        prefills: list[tuple[RequestState, int]] = []
        for r in running:
            if left <= 0:
                break
            if r.in_prefill:
                q = min(r.request.prompt_len - r.prefilled, left)
                prefills.append((r, q))
                left -= q
        admitted: list[RequestState] = []
        n_running = len(running)
        for r in waiting:
            if left <= 0 or n_running >= self.max_num_seqs or r.kv_reserved > kv_free:
                break  # FCFS: the head of the queue blocks the rest
            q = min(r.request.prompt_len, left)
            prefills.append((r, q))
            admitted.append(r)
            kv_free -= r.kv_reserved
            left -= q
            n_running += 1
        return Batch(decodes, prefills, admitted)

    def step(
        self,
        waiting: Sequence[RequestState],
        running: Sequence[RequestState],
        kv_free_tokens: float | None = None,
    ) -> tuple[Batch, PartitionPlan]:
        """One iteration's batch and plan. ``kv_free_tokens``: unreserved KV slots (default: what
        ``kv_capacity_tokens`` leaves after the running requests' reservations)."""
        if kv_free_tokens is None:
            if self.kv_capacity_tokens is None:
                kv_free_tokens = float("inf")
            else:
                kv_free_tokens = self.kv_capacity_tokens - sum(r.kv_reserved for r in running)
        batch = self.build_batch(waiting, running, kv_free_tokens)
        plan = self.optimizer.plan(batch.decode_seqs(), batch.prefill_seqs())
        if plan.prefill_token_cap is not None:
            batch = _cap_batch(batch, plan.prefill_token_cap)
        if plan.mode == "spatial" and plan.lookahead > 1:
            left = kv_free_tokens - sum(r.kv_reserved for r in batch.admitted)
            fits = 1 + int(max(left, 0) // max(len(batch.decodes), 1))
            if fits < plan.lookahead:
                self._warn_reduced(plan.lookahead, fits, len(batch.decodes), left)
                # Re-plan under the smaller k: lowering k alone would keep a split whose prefill
                # pass outlasts k decode steps, and the stall lands in the next token's gap.
                plan = self.optimizer.plan(
                    batch.decode_seqs(), batch.prefill_seqs(), max_lookahead=fits
                )
                if plan.prefill_token_cap is not None:
                    batch = _cap_batch(batch, plan.prefill_token_cap)
        return batch, plan

    def _warn_reduced(self, k: int, fits: int, n_decodes: int, kv_free: float) -> None:
        # Reservations cover each request's own output; a window overrunning a stop needs up to
        # k - 1 more slots per decode, which must come from the unreserved cache.
        self.lookahead_reductions += 1
        warnings.warn(
            f"KV headroom for {n_decodes} decodes holds {max(int(kv_free), 0)} slots, not the "
            f"{(k - 1) * n_decodes} a look-ahead of {k} needs; re-planned with look-ahead at "
            f"most {fits}",
            LookaheadReducedWarning,
            stacklevel=3,
        )


def _cap_batch(batch: Batch, cap: int) -> Batch:
    prefills: list[tuple[RequestState, int]] = []
    left = cap
    for r, q in batch.prefills:
        if left <= 0:
            break
        prefills.append((r, min(q, left)))
        left -= min(q, left)
    kept = {id(r) for r, _ in prefills}
    return Batch(batch.decodes, prefills, [r for r in batch.admitted if id(r) in kept])
