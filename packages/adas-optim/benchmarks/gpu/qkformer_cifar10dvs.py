"""AdamW against AdaS on CIFAR10-DVS with the official QKFormer settings (spec 2.4). NOT RUN here.

    python packages/adas-optim/benchmarks/gpu/qkformer_cifar10dvs.py --data FRAMES_DIR --opt adas

Needs a CUDA GPU and CIFAR10-DVS already integrated into 16 frames per sample (spikingjelly's
``CIFAR10DVS(root, data_type="frame", frames_number=16, split_by="number")`` writes them), saved as
``FRAMES_DIR/{train,test}.pt`` holding ``(frames [N, 16, 2, 128, 128] uint8/float, labels [N])``.
Nothing is downloaded. The model is our pure-torch spiking transformer (``adas_optim.snn``) with
QKFormer token attention over 16x16 patches of 64x64-pooled frames: a stand-in for QKFormer's
hierarchical conv stem, so accuracies are comparable between the two optimizers, not with the paper's
84.0 / 85.1.

Official settings kept: T = 16, lr 5e-3, weight decay 0.06 with no decay on 1-D parameters and biases
(timm factory), betas (0.9, 0.999), eps 1e-8, γ = 1.0, batch 16, 96 epochs, cosine schedule with 10
warm-up epochs from 1e-5, min lr 1e-5, label smoothing 0.1, AMP (bf16). Mixup 0.5 is left out.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch
from adas_optim.integrations import create_adas_timm_style
from adas_optim.snn import TinySpikformer
from torch import nn


def patches(frames: torch.Tensor) -> torch.Tensor:
    """[B, T, 2, 128, 128] → [T, B, 16, 2·16·16] tokens of 16x16 patches of 64x64-pooled frames."""
    b, t = frames.shape[:2]
    x = nn.functional.avg_pool2d(frames.float().flatten(0, 1), 2)  # [B·T, 2, 64, 64]
    x = x.unfold(2, 16, 16).unfold(3, 16, 16)  # [B·T, 2, 4, 4, 16, 16]
    x = x.permute(0, 2, 3, 1, 4, 5).reshape(b, t, 16, 2 * 256)
    return x.transpose(0, 1).contiguous()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--opt", choices=["adamw", "adas"], default="adas")
    parser.add_argument("--epochs", type=int, default=96)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("this benchmark needs a CUDA GPU")
    torch.manual_seed(args.seed)
    dev = torch.device("cuda")
    x_tr, y_tr = torch.load(args.data / "train.pt")
    x_te, y_te = torch.load(args.data / "test.pt")
    model = TinySpikformer(
        patch_dim=512, num_tokens=16, dim=256, heads=8, depth=4, time_steps=16, attention="qk"
    ).to(dev)
    lr, warm, epochs, min_lr = 5e-3, 10, args.epochs, 1e-5
    if args.opt == "adas":
        opt = create_adas_timm_style(model, lr=lr, weight_decay=0.06, gamma=1.0)
    else:
        from adas_optim.integrations import no_decay_param_groups

        groups = no_decay_param_groups(model, 0.06, ("bias",), one_dim_no_decay=True)
        opt = torch.optim.AdamW(groups, lr=lr)
    steps = math.ceil(len(y_tr) / 16)

    def lr_at(epoch: float) -> float:
        if epoch < warm:
            return 1e-5 + (lr - 1e-5) * epoch / warm
        return min_lr + 0.5 * (lr - min_lr) * (
            1 + math.cos(math.pi * (epoch - warm) / (epochs - warm))
        )

    for epoch in range(epochs):
        model.train()
        for i, idx in enumerate(torch.randperm(len(y_tr)).split(16)):
            for g in opt.param_groups:
                g["lr"] = lr_at(epoch + i / steps)
            x, y = patches(x_tr[idx].to(dev)), y_tr[idx].to(dev)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = nn.functional.cross_entropy(model(x), y, label_smoothing=0.1)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        model.eval()
        correct = 0
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            for idx in torch.arange(len(y_te)).split(64):
                pred = model(patches(x_te[idx].to(dev))).argmax(1)
                correct += int((pred == y_te[idx].to(dev)).sum())
        print(f"epoch {epoch} {args.opt} top-1 {correct / len(y_te):.4f}", flush=True)


if __name__ == "__main__":
    main()
