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

    assert dev(DLLMCacheConfig(1, 1, 0.0)) == {"kl": 0.0, "rel_l2": 0.0}  # bit-identical
    stale, adaptive = dev(DLLMCacheConfig(100, 100, 0.0)), dev(DLLMCacheConfig(100, 100, 0.5))
    assert stale["kl"] > adaptive["kl"] > 0
    assert stale["rel_l2"] > adaptive["rel_l2"] > 0
