"""The paper's setting on real endpoints (not run here: no network, no GPU): edge + cloud + planner.

    export HYBRIDFLOW_EDGE_URL=http://127.0.0.1:8000/v1 HYBRIDFLOW_EDGE_MODEL=meta-llama/Llama-3.2-3B-Instruct
    export HYBRIDFLOW_CLOUD_URL=https://api.openai.com/v1 HYBRIDFLOW_CLOUD_MODEL=gpt-4.1 OPENAI_API_KEY=...
    export HYBRIDFLOW_PLANNER_URL=... HYBRIDFLOW_PLANNER_MODEL=...   # optional: else the rule-based planner
    export HYBRIDFLOW_DATA=gpqa.jsonl   # one {"question": ..., "answer": ...} per line, a local file
    export HYBRIDFLOW_ROUTER=router.npz  # optional: a UtilityRouter checkpoint, else the fixed threshold
    python packages/hybridflow/benchmarks/hybridflow_live.py --limit 50

Serve the edge model with e.g. ``vllm serve meta-llama/Llama-3.2-3B-Instruct --port 8000``. Reports
accuracy (exact match of the last line, case-insensitive), latency, cloud tokens and cost for
HybridFlow, its Chain ablation and cloud-only direct answering. Skips (exit 0) when a variable or the
data file is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

import numpy as np
from hybridflow import HybridFlow, ModelEndpoint, QueryRouter, ThresholdRouter, UtilityRouter


def _need(name: str) -> str | None:
    value = os.environ.get(name)
    if not value:
        print(f"skipped: ${name} is not set", file=sys.stderr)
    return value


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=50)
    ap.add_argument("--concurrency", type=int, default=4)
    a = ap.parse_args()
    env = {
        k: _need(k)
        for k in (
            "HYBRIDFLOW_EDGE_URL",
            "HYBRIDFLOW_EDGE_MODEL",
            "HYBRIDFLOW_CLOUD_URL",
            "HYBRIDFLOW_CLOUD_MODEL",
            "HYBRIDFLOW_DATA",
        )
    }
    if not all(env.values()) or not Path(str(env["HYBRIDFLOW_DATA"])).is_file():
        print("skipped: the live benchmark needs endpoints and a local data file", file=sys.stderr)
        return 0
    edge = ModelEndpoint(str(env["HYBRIDFLOW_EDGE_MODEL"]), str(env["HYBRIDFLOW_EDGE_URL"]))
    cloud = ModelEndpoint(str(env["HYBRIDFLOW_CLOUD_MODEL"]), str(env["HYBRIDFLOW_CLOUD_URL"]), api_key_env="OPENAI_API_KEY",
                          price_in_per_mtok=2.0, price_out_per_mtok=8.0)  # fmt: skip
    planner = None
    if os.environ.get("HYBRIDFLOW_PLANNER_URL") and os.environ.get("HYBRIDFLOW_PLANNER_MODEL"):
        planner = ModelEndpoint(
            os.environ["HYBRIDFLOW_PLANNER_MODEL"],
            os.environ["HYBRIDFLOW_PLANNER_URL"],
            api_key_env="PLANNER_API_KEY",
        )
    ckpt = os.environ.get("HYBRIDFLOW_ROUTER")
    router = UtilityRouter.load(ckpt) if ckpt else ThresholdRouter(5)
    rows = [
        json.loads(line)
        for line in Path(str(env["HYBRIDFLOW_DATA"])).read_text().splitlines()
        if line.strip()
    ][: a.limit]
    cloud_only = QueryRouter().fit(["a", "b"], [0.0, 1.0]).with_threshold(-np.inf)
    arms = {
        "HybridFlow": HybridFlow(edge, cloud, router, planner=planner, max_workers=10),
        "HybridFlow-Chain": HybridFlow(edge, cloud, router, planner=planner, chain=True),
        "cloud-only": HybridFlow(edge, cloud, cloud_only),
    }
    for name, flow in arms.items():

        async def go(flow: HybridFlow = flow) -> list:
            try:
                return await flow.arun_many(
                    [r["question"] for r in rows], concurrency=a.concurrency
                )
            finally:
                await flow.aclose()

        results = asyncio.run(go())
        right = [str(r["answer"]).strip().lower() == (res.answer or "").strip().splitlines()[-1:][0].lower() if res.answer else False
                 for r, res in zip(rows, results, strict=False)]  # fmt: skip
        print(json.dumps({"arm": name, "accuracy": float(np.mean(right)), "latency_s": float(np.mean([r.latency_s for r in results])),
                          "cloud_tokens": float(np.mean([r.totals()["cloud_tokens"] for r in results])),
                          "cost_usd": float(np.mean([r.totals()["cost_usd"] for r in results]))}))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
