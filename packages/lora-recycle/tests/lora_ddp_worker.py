"""Train a merge with train_adaptive_merge; run alone or under torchrun (gloo): writes the coefficients.

    python lora_ddp_worker.py OUT.json BATCH          # one process, per-device batch BATCH
    python -m torch.distributed.run --nproc_per_node 2 lora_ddp_worker.py OUT.json BATCH/2

Every optimiser step sees the whole 8-example training set (one batch per epoch), so one process with
batch 8 and two with batch 4 each take the same mean gradient: their coefficients must agree.
"""

import json
import os
import sys

import torch
from lora_recycle import (
    AdaptiveMergeConfig,
    LoraExpert,
    LoraPool,
    get_adaptive_merge_model,
    train_adaptive_merge,
)
from lora_recycle.synthetic import Classifier


def main(out: str, batch: int) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    base = Classifier(6, 8, 3)
    g = torch.Generator().manual_seed(1)
    experts = [
        LoraExpert(
            f"e{i}",
            {
                "net.0": (torch.randn(2, 6, generator=g), torch.randn(8, 2, generator=g) * 0.5),
                "net.4": (torch.randn(2, 8, generator=g), torch.randn(3, 2, generator=g) * 0.5),
            },
            1.0,
        )
        for i in range(3)
    ]
    model = get_adaptive_merge_model(
        base, LoraPool.from_experts(experts, base), AdaptiveMergeConfig(activation="identity")
    )
    x = torch.randn(12, 6, generator=g)
    y = torch.randint(0, 3, (12,), generator=g)
    data = [{"x": xi, "labels": yi} for xi, yi in zip(x, y, strict=True)]
    result = train_adaptive_merge(
        model,
        data[:8],
        data[8:],
        lr=0.1,
        max_steps=6,
        batch_size=batch,
        grad_accum=1,
        eval_every=2,
        ddp_backend="gloo" if "LOCAL_RANK" in os.environ else None,
    )
    if int(os.environ.get("RANK", "0")) == 0:
        coefficients = {k: v.tolist() for k, v in model.coefficients().items()}
        with open(out, "w") as f:
            json.dump(
                {
                    "coefficients": coefficients,
                    "best_step": result.best_step,
                    "history": result.history,
                },
                f,
            )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
