"""Where the reproduction's same-input KL comes from: per response position and per step.

    python packages/dllm-cache/benchmarks/kl_breakdown.py

The shipped R = 32 fixture, 16 generated ``pick`` prompts (seed 0), 32 steps in one block. Each arm
is fed the uncached run's inputs step by step (as ``reproduce``'s KL column); prints the mean KL and
relative logit error over the still-masked positions, split into the 4 answer-digit positions and
the 28 EOS positions, and the KL per step (sum over masked positions / masked count).
"""

import torch
from dllm_cache import DLLMCacheConfig, TinyLLaDA, apply_dllm_cache
from dllm_cache.reproduce import FROZEN, _uncached_trajectory
from dllm_cache.tasks import MASK, make_batch
from dllm_cache.train import PACKAGED
from dllm_cache.train import REPRODUCTION_SPEC as SPEC

torch.set_num_threads(1)
R = SPEC.response_length
DIGITS = SPEC.digits
ARMS = {
    "Kp=Kr=1 (must be 0)": DLLMCacheConfig(1, 1, 0.0),
    "dLLM-Cache (Kp=100, Kr=4, rho=0.25)": DLLMCacheConfig(100, 4, 0.25),
    "frozen cache": FROZEN,
    "Kr=inf, rho=0": DLLMCacheConfig(100, 10_000, 0.0),
}

model = TinyLLaDA.from_pretrained(next(PACKAGED.glob("tiny-llada-*"))).eval()
prompts, _ = make_batch(SPEC, 16, 3, torch.Generator().manual_seed(0))
P = prompts.shape[1]
inputs, refs = _uncached_trajectory(
    model, prompts, dict(mask_id=MASK, gen_length=R, block_length=R, steps=R)
)
with torch.no_grad():
    for name, config in ARMS.items():
        kl_sum = torch.zeros(len(inputs), R, dtype=torch.float64)
        rel_sum = torch.zeros_like(kl_sum)
        count = torch.zeros_like(kl_sum)
        with apply_dllm_cache(model, config) as handle:
            handle.cache.reset(P)
            for s, (x, ref) in enumerate(zip(inputs, refs, strict=True)):
                out = model(x, logits_to_keep=R).logits
                keep = torch.arange(ref.shape[-1]) != MASK
                ref_d, out_d = ref[..., keep].double(), out[..., keep].double()
                masked = x[:, P:] == MASK
                log_p, log_q = ref_d.log_softmax(-1), out_d.log_softmax(-1)
                kl = (log_p.exp() * (log_p - log_q)).sum(-1)
                rel = (out_d - ref_d).norm(dim=-1) / ref_d.norm(dim=-1)
                kl_sum[s], rel_sum[s], count[s] = (
                    (kl * masked).sum(0),
                    (rel * masked).sum(0),
                    masked.sum(0),
                )

        def mean(t, cols, count=count):
            return float(t[:, cols].sum() / count[:, cols].sum().clamp(min=1))

        d, e = slice(0, DIGITS), slice(DIGITS, R)
        print(f"{name}: KL {mean(kl_sum, slice(None)):.6f} (digits {mean(kl_sum, d):.4f}, EOS "
              f"{mean(kl_sum, e):.6f}); rel error {mean(rel_sum, slice(None)):.4f} (digits "
              f"{mean(rel_sum, d):.4f}, EOS {mean(rel_sum, e):.4f}); masked (position, step)s: "
              f"digits {int(count[:, d].sum())}, EOS {int(count[:, e].sum())}")  # fmt: skip
        per_step = kl_sum.sum(1) / count.sum(1).clamp(min=1)
        print("  KL per step:", " ".join(f"{v:.4f}" for v in per_step.tolist()))
