"""Integrations with serving engines. ``duetserve.integrations.vllm`` imports vLLM; the plan logic it
applies lives in :mod:`duetserve.integrations.plan`, which does not."""
