"""hybridflow: HybridFlow edge-cloud subtask routing over OpenAI-compatible endpoints.

A planner streams a DAG of subtasks; an asyncio scheduler runs ready steps in parallel; a learned
benefit-cost router sends each step to a small edge model or a large cloud model under token and
latency budgets (Dong et al., ICML 2026).
"""

from importlib.metadata import PackageNotFoundError, version

from hybridflow.accounting import BudgetLedger, HybridFlowResult, StepRecord
from hybridflow.client import Attempt, CallFailed, ChatClient, Completion
from hybridflow.embedders import CallableEmbedder, HashingEmbedder, MiniLMEmbedder
from hybridflow.endpoints import Budget, ModelEndpoint, RetryPolicy
from hybridflow.latency import chrome_trace, makespan, step_time
from hybridflow.pipeline import HybridFlow, StepFailed
from hybridflow.plan import PlanError, Subtask, TaskDAG
from hybridflow.planners import PLANNER_PROMPT, CallablePlanner, LLMPlanner, RulePlanner, rule_plan
from hybridflow.router import (
    ConstantRouter,
    QueryRouter,
    RandomRouter,
    RouteDecision,
    ThresholdRouter,
    UtilityRouter,
    adaptive_threshold,
    p_cloud,
)
from hybridflow.server import serve
from hybridflow.training import SubtaskProfile, dq_accuracy, dq_length, router_loss, utility_label

try:
    __version__ = version("hybridflow")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "PLANNER_PROMPT",
    "Attempt",
    "Budget",
    "BudgetLedger",
    "CallFailed",
    "CallableEmbedder",
    "CallablePlanner",
    "ChatClient",
    "Completion",
    "ConstantRouter",
    "HashingEmbedder",
    "HybridFlow",
    "HybridFlowResult",
    "LLMPlanner",
    "MiniLMEmbedder",
    "ModelEndpoint",
    "PlanError",
    "QueryRouter",
    "RandomRouter",
    "RetryPolicy",
    "RouteDecision",
    "RulePlanner",
    "StepFailed",
    "StepRecord",
    "Subtask",
    "SubtaskProfile",
    "TaskDAG",
    "ThresholdRouter",
    "UtilityRouter",
    "__version__",
    "adaptive_threshold",
    "chrome_trace",
    "dq_accuracy",
    "dq_length",
    "makespan",
    "p_cloud",
    "router_loss",
    "rule_plan",
    "serve",
    "step_time",
    "utility_label",
]
