"""The plan logic the vLLM scheduler applies, on duck-typed requests (no vLLM needed)."""

import dataclasses

import pytest
from duetserve import PartitionOptimizer, Seq
from duetserve.integrations.plan import plan_step


@dataclasses.dataclass
class Req:  # the attributes vLLM V1's Request has
    num_computed_tokens: int
    num_prompt_tokens: int
    num_tokens_with_spec: int


def decoding(ctx):
    return Req(ctx, ctx - 5, ctx + 1)


def test_a_fitting_step_keeps_the_default_budget(qwen8b):
    opt = PartitionOptimizer(qwen8b, 0.2)
    step = plan_step([decoding(500)] * 8, [Req(0, 300, 300)], 8192, opt)
    assert step.token_budget == 8192 and step.record["mode"] == "aggregated"
    assert step.record["prefill_tokens"] == 300 and step.record["n_decodes"] == 8


def test_a_step_that_misses_the_slo_gets_the_attention_aware_cap(qwen8b):
    opt = PartitionOptimizer(qwen8b, 0.05)
    running = [decoding(3000)] * 32 + [Req(1000, 9000, 9000)]
    step = plan_step(running, [Req(0, 6000, 6000)], 8192, opt)
    cap = step.record["prefill_cap"]
    assert step.token_budget == 32 + cap < 8192
    decodes = [Seq(3000)] * 32
    # the capped batch, built as vLLM would (continuing prefill first), meets the SLO
    assert qwen8b.iteration_latency([*decodes, Seq(1000, cap)]) <= 0.05
    assert qwen8b.iteration_latency([*decodes, Seq(1000, cap + 64)]) > 0.05
    assert step.record["mode"] == "spatial" and step.record["spatial_n_sm_decode"] > 0


def test_longer_contexts_get_smaller_caps(qwen8b):
    # what a token budget cannot see: the same decode count at 4x the context leaves less room
    opt = PartitionOptimizer(qwen8b, 0.05)
    short = plan_step([decoding(1000)] * 64, [Req(0, 8000, 8000)], 8192, opt)
    long = plan_step([decoding(16000)] * 64, [Req(0, 8000, 8000)], 8192, opt)
    assert long.record["prefill_cap"] < short.record["prefill_cap"]


def test_decodes_are_never_cut(qwen8b):
    opt = PartitionOptimizer(qwen8b, 1e-4)
    step = plan_step([decoding(100)] * 50, [Req(0, 4000, 4000)], 8192, opt)
    assert step.token_budget >= 50
    assert step.record["reason"] == "fallback"


def test_the_vllm_module_says_what_to_install_when_vllm_is_absent():
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r"duetserve\[peers\]"):
            import duetserve.integrations.vllm  # noqa: F401
    else:
        pytest.skip("vLLM is installed here")


def test_vllm_versions_outside_the_tested_range_are_refused(monkeypatch):
    from duetserve.integrations.plan import check_vllm_version

    monkeypatch.delenv("DUETSERVE_ALLOW_UNTESTED_VLLM", raising=False)
    check_vllm_version("0.32.0")
    check_vllm_version("0.32.4+cpu")
    with pytest.raises(RuntimeError, match=r"tested on vLLM 0\.32-0\.32\.x, found 0\.30\.1"):
        check_vllm_version("0.30.1")
    with pytest.raises(RuntimeError, match=r"found 0\.33\.1\+cpu"):  # only 0.32 was tested
        check_vllm_version("0.33.1+cpu")
    monkeypatch.setenv("DUETSERVE_ALLOW_UNTESTED_VLLM", "1")
    check_vllm_version("0.40.0")
