"""Batch invariance: first-step logit gaps and greedy tokens, batch 4 (left-padded) vs batch 1.

    python packages/dllm-cache/benchmarks/batch_invariance.py

A random TinyLLaDA, four prompts of lengths 21, 9, 16, 13, in fp32 and bf16 on CPU. Prints the
largest absolute logit gap per row between the padded batch and the row run alone, and whether
the greedy outputs are identical.
"""

import torch
from dllm_cache import TinyLLaDA, TinyLLaDAConfig, generate

torch.set_num_threads(1)
torch.manual_seed(2)
model = TinyLLaDA(
    TinyLLaDAConfig(
        vocab_size=48, d_model=32, n_heads=4, n_layers=3, mlp_hidden_size=64, init_std=0.1
    )
).eval()
g = torch.Generator().manual_seed(0)
lengths = [21, 9, 16, 13]
rows = [torch.randint(4, 48, (1, n), generator=g) for n in lengths]
P = max(lengths)
batch = torch.zeros(4, P, dtype=torch.long)
mask = torch.zeros(4, P, dtype=torch.long)
for i, r in enumerate(rows):
    batch[i, P - r.shape[1] :], mask[i, P - r.shape[1] :] = r, 1
for dtype in (torch.float32, torch.bfloat16):
    m = model.to(dtype)
    # logits of the first step: batch 4 (padded) vs each row alone
    x4 = torch.cat([batch, torch.full((4, 8), 3)], 1)
    full_mask = torch.cat([mask, torch.ones(4, 8, dtype=torch.long)], 1)
    with torch.no_grad():
        l4 = m(x4, attention_mask=full_mask).logits[:, -8:].float()
        gaps = []
        for i, r in enumerate(rows):
            l1 = m(torch.cat([r, torch.full((1, 8), 3)], 1)).logits[:, -8:].float()
            gaps.append(float((l4[i] - l1[0]).abs().max()))
    kw = dict(mask_id=3, gen_length=8, block_length=8, steps=8)
    together = generate(m, batch, mask, **kw)
    same = [bool(torch.equal(together[i], generate(m, r, **kw)[0])) for i, r in enumerate(rows)]
    print(
        dtype,
        "max |logit gap| batch4 vs batch1 per row:",
        [f"{x:.2e}" for x in gaps],
        "tokens identical:",
        same,
    )
