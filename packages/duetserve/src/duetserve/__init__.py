"""duetserve: DuetServe's SM-multiplexing LLM serving scheduler (attention-aware roofline, per-iteration
partition optimizer with look-ahead), a roofline-driven serving simulator, a green-context SM
partitioner and a vLLM V1 scheduler plugin."""

from importlib.metadata import PackageNotFoundError, version

from duetserve.hardware import HardwareProfile
from duetserve.optimizer import PartitionOptimizer, PartitionPlan, overlap_throughput
from duetserve.roofline import BatchStats, LatencyBreakdown, RooflineModel, Seq
from duetserve.scheduler import Batch, DuetScheduler, LookaheadReducedWarning, RequestState
from duetserve.shapes import ModelShape
from duetserve.simulator import SimResult, kv_capacity_tokens, simulate
from duetserve.workloads import (
    Request,
    bursty_trace,
    load_trace,
    poisson_trace,
    scale_rate,
    shifting_trace,
)

try:
    __version__ = version("duetserve")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "Batch",
    "BatchStats",
    "DuetScheduler",
    "HardwareProfile",
    "LatencyBreakdown",
    "LookaheadReducedWarning",
    "ModelShape",
    "PartitionOptimizer",
    "PartitionPlan",
    "Request",
    "RequestState",
    "RooflineModel",
    "Seq",
    "SimResult",
    "__version__",
    "bursty_trace",
    "kv_capacity_tokens",
    "load_trace",
    "overlap_throughput",
    "poisson_trace",
    "scale_rate",
    "shifting_trace",
    "simulate",
]
