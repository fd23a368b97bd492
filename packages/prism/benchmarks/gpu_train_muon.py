"""GPT-style language-model training with AdamW, Muon and PrismMuon (Sec. 6.2): NOT run in CI.

    python packages/prism/benchmarks/gpu_train_muon.py --data fineweb_train.bin --val fineweb_val.bin \
        [--steps 3000] [--optimizer prism|muon|adamw]

The paper's model: 10 layers, 16 heads, width 1024, ~200M FineWeb tokens. ``--data``/``--val`` are flat
uint16 token files (the modded-nanogpt ``.bin`` shards without their 1 KiB header, or with
``--header 256`` int32 words). Logs train/val loss and, every ``--log-alpha`` steps, PRISM's α sequence
for the first hidden matrix, to a JSON lines file. Needs a CUDA GPU and the data on disk.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np
import prism_matfn as pm
import torch
from prism_matfn.optim import PrismMuon
from prism_matfn.training import MUON_COEFFICIENTS
from torch import nn


class Block(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.RMSNorm(width), nn.RMSNorm(width)
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.proj = nn.Linear(width, width, bias=False)
        self.up = nn.Linear(width, 4 * width, bias=False)
        self.down = nn.Linear(4 * width, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, c // self.heads).unbind(2)
        y = nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.down(nn.functional.gelu(self.up(self.norm2(x))))


class GPT(nn.Module):
    def __init__(
        self, vocab: int = 50304, width: int = 1024, layers: int = 10, heads: int = 16
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.norm = nn.RMSNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def batches(path: str, header: int, batch: int, seq: int, seed: int):
    tokens = np.memmap(path, dtype=np.uint16, mode="r", offset=4 * header)
    rng = np.random.default_rng(seed)
    while True:
        starts = rng.integers(0, len(tokens) - seq - 1, batch)
        chunk = torch.from_numpy(
            np.stack([tokens[s : s + seq + 1] for s in starts]).astype(np.int64)
        )
        yield chunk[:, :-1].cuda(non_blocking=True), chunk[:, 1:].cuda(non_blocking=True)


def make_optimizer(name: str, model: GPT, lr_scale: float) -> torch.optim.Optimizer:
    if name == "adamw":
        return torch.optim.AdamW(
            model.parameters(), lr=6e-4 * lr_scale, betas=(0.9, 0.95), weight_decay=0.1
        )
    hidden = [p for b in model.blocks for p in b.parameters() if p.ndim >= 2]
    rest = [p for p in model.parameters() if all(p is not h for h in hidden)]
    groups = [{"params": hidden}, {"params": rest, "use_muon": False}]
    # Both orthogonalise in bfloat16 on CUDA (compute_dtype=None), Muon with Keller's coefficients.
    extra = {"ns_coefficients": MUON_COEFFICIENTS} if name == "muon" else {}
    return PrismMuon(
        groups, lr=0.02 * lr_scale, adam_lr=6e-4 * lr_scale, compute_dtype=torch.bfloat16, **extra
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--val", required=True)
    parser.add_argument("--header", type=int, default=256, help="int32 header words to skip")
    parser.add_argument("--optimizer", default="prism", choices=["prism", "muon", "adamw"])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--log-alpha", type=int, default=100)
    parser.add_argument("--out", default="gpu_train_muon.jsonl")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gpu_train_muon.py needs a CUDA device")
    torch.manual_seed(0)
    model = GPT().cuda().bfloat16()
    opt = make_optimizer(args.optimizer, model, 1.0)
    train, val = (
        batches(args.data, args.header, args.batch, args.seq, 0),
        batches(args.val, args.header, args.batch, args.seq, 1),
    )
    with open(args.out, "w") as log:
        start = time.time()
        for step in range(args.steps):
            for g in opt.param_groups:  # linear warm-down over the last 30% of steps
                g.setdefault("base_lr", g["lr"])
                g["lr"] = g["base_lr"] * min(1.0, (args.steps - step) / (0.3 * args.steps))
            x, y = next(train)
            loss = nn.functional.cross_entropy(model(x).float().flatten(0, 1), y.flatten())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            record = {"step": step, "train_loss": loss.item(), "elapsed_s": time.time() - start}
            if args.optimizer == "prism" and step % args.log_alpha == 0:
                W = model.blocks[0].qkv.weight
                buf = opt.state[W]["momentum_buffer"].float()
                record["alphas"] = pm.polar(buf, steps=5, return_info=True)[1].alphas.tolist()
            if step % 250 == 0 or step == args.steps - 1:
                with torch.no_grad():
                    xv, yv = next(val)
                    record["val_loss"] = nn.functional.cross_entropy(
                        model(xv).float().flatten(0, 1), yv.flatten()
                    ).item()
                print(record, flush=True)
            log.write(json.dumps(record) + "\n")
    print(f"done: {args.optimizer}, final val loss {record.get('val_loss', math.nan)}")


if __name__ == "__main__":
    main()
