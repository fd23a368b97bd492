"""The per-step plan DuetServe applies inside an engine's scheduler, engine-agnostic.

An engine request is anything with ``num_computed_tokens``, ``num_prompt_tokens`` and
``num_tokens_with_spec`` (vLLM V1's ``Request``). From the running and waiting requests the step's
decode-first mixed batch is predicted as the engine would build it (decodes first, then prefill
chunks first-come-first-served under the token budget), and the optimizer plans it. A scheduler that
cannot run spatial mode (vLLM's model runner executes one batch on one stream) applies the
attention-aware chunk cap: when the predicted mixed batch misses the TBT SLO, the step's token budget
shrinks to the decodes plus the largest prefill that meets it. The record says what spatial mode
would have done.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from typing import Any, Protocol

from duetserve.optimizer import PartitionOptimizer
from duetserve.roofline import BatchStats, Seq


class EngineRequest(Protocol):
    num_computed_tokens: int
    num_prompt_tokens: int

    @property
    def num_tokens_with_spec(self) -> int: ...


@dataclasses.dataclass(frozen=True)
class StepPlan:
    """The token budget to schedule this step with, and what the optimizer saw."""

    token_budget: int
    record: dict[str, Any]


def plan_step(
    running: Iterable[EngineRequest],
    waiting: Iterable[EngineRequest],
    token_budget: int,
    optimizer: PartitionOptimizer,
) -> StepPlan:
    """The step's budget: ``token_budget`` when the predicted mixed batch meets the SLO, else the
    decode tokens plus the SLO-meeting prefill cap. Decodes are never cut."""
    decodes: list[Seq] = []
    decode_tokens = 0
    prefills: list[Seq] = []
    for r in running:
        new = r.num_tokens_with_spec - r.num_computed_tokens
        if new <= 0:
            continue
        if r.num_computed_tokens >= r.num_prompt_tokens:
            decodes.extend(Seq(r.num_computed_tokens + j) for j in range(new))
            decode_tokens += new
        else:
            prefills.append(Seq(r.num_computed_tokens, r.num_prompt_tokens - r.num_computed_tokens))
    left = token_budget - decode_tokens
    chunks: list[Seq] = []
    for p in [
        *prefills,
        *(
            Seq(r.num_computed_tokens, r.num_prompt_tokens - r.num_computed_tokens)
            for r in waiting
            if r.num_prompt_tokens > r.num_computed_tokens
        ),
    ]:
        if left <= 0:
            break
        q = min(p.new_tokens, left)
        chunks.append(Seq(p.context, q))
        left -= q
    plan = optimizer.plan(BatchStats.of(decodes), chunks)
    predicted_tokens = sum(c.new_tokens for c in chunks)
    budget, cap = token_budget, None
    if plan.reason == "fallback":
        cap = plan.prefill_token_cap
    elif plan.mode == "spatial":  # not executable here: the chunk cap in its place
        cap, _ = optimizer.prefill_cap(BatchStats.of(decodes), chunks)
    if cap is not None:
        budget = max(decode_tokens + cap, 1)
    record = {
        "mode": plan.mode,
        "reason": plan.reason,
        "n_decodes": len(decodes),
        "prefill_tokens": predicted_tokens,
        "prefill_cap": cap,
        "token_budget": budget,
        "t_mix_pred_s": plan.predicted.get("t_mix"),
        "spatial_n_sm_decode": plan.n_sm_decode if plan.mode == "spatial" else None,
        "spatial_lookahead": plan.lookahead if plan.mode == "spatial" else None,
    }
    return StepPlan(budget, record)


TESTED_VLLM = (
    (0, 32),
    (0, 32),
)  # [lowest, highest] minor series the scheduler hooks were checked on
ALLOW_UNTESTED = "DUETSERVE_ALLOW_UNTESTED_VLLM"


def check_vllm_version(version: str) -> None:
    """Raise ``RuntimeError`` outside the tested vLLM range unless DUETSERVE_ALLOW_UNTESTED_VLLM=1."""
    parts = tuple(int(p) for p in version.split("+")[0].split(".")[:2] if p.isdigit())
    lo, hi = TESTED_VLLM
    if lo <= parts <= hi or os.environ.get(ALLOW_UNTESTED) == "1":
        return
    raise RuntimeError(
        f"duetserve's vLLM scheduler hooks were tested on vLLM {lo[0]}.{lo[1]}-{hi[0]}.{hi[1]}.x, "
        f"found {version}: the private Scheduler interface changes between releases. Install a "
        f"tested vLLM, or set {ALLOW_UNTESTED}=1 to try anyway"
    )
