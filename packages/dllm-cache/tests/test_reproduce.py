import torch
from dllm_cache.reproduce import main

from shared_core.report import Report


def test_reproduce_smoke_writes_a_report(tmp_path):
    assert main(["--smoke", "--out", str(tmp_path)]) == 0
    report = Report.load(tmp_path)
    assert report.package == "dllm-cache"
    assert (tmp_path / "report.md").exists()


def test_logit_deviation_is_zero_for_identity_and_orders_the_budgets(make_model, prompts):
    from dllm_cache import DLLMCacheConfig
    from dllm_cache.reproduce import _logit_deviation, _uncached_trajectory

    model = make_model()
    P, MASK = 24, 3
    gen = dict(mask_id=MASK, gen_length=16, block_length=16, steps=16)
    trajectory = [_uncached_trajectory(model, prompts(2, P), gen)]
    inputs, logits = trajectory[0]
    assert len(inputs) == len(logits) == 16
    assert torch.equal(logits[0], model(inputs[0], logits_to_keep=16).logits)

    def dev(config):
        return _logit_deviation(model, trajectory, P, config, MASK)

    identity = dev(DLLMCacheConfig(1, 1, 0.0))  # bit-identical
    assert (identity["kl"], identity["rel_l2"]) == (0.0, 0.0)
    assert identity["kl_per_prompt"] == [0.0, 0.0]
    stale, adaptive = dev(DLLMCacheConfig(100, 100, 0.0)), dev(DLLMCacheConfig(100, 100, 0.5))
    assert stale["kl"] > adaptive["kl"] > 0
    assert stale["rel_l2"] > adaptive["rel_l2"] > 0


def test_paired_bootstrap_and_the_prompt_length_the_paper_needs():
    import numpy as np
    from dllm_cache.reproduce import hotpot_ratio, paired_bootstrap, prompt_length_for

    a = np.array([1.0, 0.0, 1.0, 1.0] * 10)
    mean, lo, hi = paired_bootstrap(a, a)
    assert (mean, lo, hi) == (0.0, 0.0, 0.0)  # no difference: an interval of zero width
    mean, lo, hi = paired_bootstrap(a, np.zeros_like(a))
    assert lo > 0 and abs(mean - 0.75) < 1e-12
    n = prompt_length_for(9.1)
    assert hotpot_ratio(n) >= 9.1 > hotpot_ratio(n - 1)
    assert n > 4096  # beyond LLaDA-8B's context (spec §2.4: 8.8x at P=8000, 9.3x at 12000)
