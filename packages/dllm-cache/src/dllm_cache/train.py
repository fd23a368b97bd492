"""Train a :class:`TinyLLaDA` with LLaDA's SFT loss on the generated tasks, cached on disk.

    python -m dllm_cache.train --steps 1000 --out tiny-llada/

The SFT loss (LLaDA ``GUIDELINES.md``): draw ``t ~ U(0, 1)`` per sequence, mask each *answer*
token with probability ``p = (1 - ε) t + ε`` (the prompt is never masked), and average the
masked tokens' cross-entropy weighted by ``1 / p`` and divided by the answer length.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from dllm_cache.model import TinyLLaDA, TinyLLaDAConfig
from dllm_cache.tasks import BOS, EOS, MASK, PAD, VOCAB_SIZE, TaskSpec, make_batch
from shared_core.data import atomic_directory, cache_dir, recipe_hash

EPS = 1e-3
#: The reproduction's task: pick one of two 4-digit strings after 0-3 worked examples (prompts
#: <= 57 tokens). Its answer digits depend on each other, so one-step decoding mixes the two
#: strings and the fixture needs refinement (a copy task does not: every digit is fixed by the
#: prompt). Short prompts keep training within CPU minutes.
REPRODUCTION_SPEC = TaskSpec(ops=("pick",))
#: The reproduction fixture's training recipe (besides ``steps``, ``size`` and ``seed``).
REPRODUCTION_RECIPE: dict[str, Any] = dict(batch_size=64, min_shots=0, max_shots=3, lr=3e-3)
REPRODUCTION_STEPS = 2000
#: Checkpoints shipped with the package (the reproduction's model), keyed like the cache.
PACKAGED = Path(__file__).parent / "checkpoints"
_RECIPE_FORMAT = 3  # bump when the recipe's meaning changes, so old checkpoints are not reused


def sft_loss(
    model: TinyLLaDA, prompts: Tensor, answers: Tensor, mask_id: int, generator: torch.Generator
) -> Tensor:
    """LLaDA's SFT loss for one batch of prompts (B×P) and answers (B×R)."""
    B, R = answers.shape
    t = torch.rand(B, 1, generator=generator)
    p_mask = (1 - EPS) * t + EPS
    masked = torch.rand(B, R, generator=generator) < p_mask
    noisy = torch.where(masked, torch.full_like(answers, mask_id), answers)
    logits = model(torch.cat([prompts, noisy], 1), logits_to_keep=R).logits
    token_loss = (
        F.cross_entropy(logits[masked], answers[masked], reduction="none")
        / p_mask.expand(B, R)[masked]
    )
    # every answer has R tokens (EOS-padded), so the per-answer-length normalisation is 1/R
    return token_loss.sum() / (R * B)


def model_config(size: str = "small") -> TinyLLaDAConfig:
    """The TinyLLaDA widths used by the reproduction (``"small"``) and the smoke test (``"toy"``)."""
    widths = {"toy": (32, 2, 64), "small": (64, 4, 192)}[size]
    d, layers, ff = widths
    return TinyLLaDAConfig(
        vocab_size=VOCAB_SIZE, d_model=d, n_heads=4, n_layers=layers, mlp_hidden_size=ff,
        mask_token_id=MASK, pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS,
    )  # fmt: skip


def train_tiny_llada(
    steps: int = 1000,
    *,
    size: str = "small",
    batch_size: int = 32,
    min_shots: int = 2,
    max_shots: int = 12,
    lr: float = 1e-2,
    seed: int = 0,
    spec: TaskSpec | None = None,
    cache: bool = True,
) -> tuple[TinyLLaDA, list[float]]:
    """Train (or load the cached result of) a TinyLLaDA on the copy/reverse tasks.

    Each batch has ``min_shots..max_shots`` in-context examples, so prompts of up to
    ``spec.prompt_length(max_shots)`` tokens. The checkpoint and losses are cached under
    ``shared_core.data.cache_dir("dllm-cache")`` keyed by the whole recipe.
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if not 0 <= min_shots <= max_shots:
        raise ValueError(f"need 0 <= min_shots <= max_shots, got {min_shots}, {max_shots}")
    spec = spec or TaskSpec()
    recipe: dict[str, Any] = dict(
        format=_RECIPE_FORMAT, steps=steps, size=size, batch_size=batch_size, max_shots=max_shots,
        min_shots=min_shots,
        lr=lr, seed=seed, digits=spec.digits, response_length=spec.response_length, ops=list(spec.ops),
    )  # fmt: skip
    name = f"tiny-llada-{recipe_hash(recipe)}"
    target = cache_dir("dllm-cache") / name
    for folder in (PACKAGED / name, target):
        if cache and (folder / "losses.json").exists():
            model = TinyLLaDA.from_pretrained(folder).eval()
            return model, json.loads((folder / "losses.json").read_text())["losses"]
    torch.manual_seed(seed)
    model = TinyLLaDA(model_config(size))
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
    warmup = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda i: (
            min(1.0, (i + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(i, steps) / steps))
        ),
    )
    losses = []
    model.train()
    for _ in range(steps):
        n_shots = int(torch.randint(min_shots, max_shots + 1, (1,), generator=g))
        prompts, answers = make_batch(spec, batch_size, n_shots, g)
        loss = sft_loss(model, prompts, answers, MASK, g)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    model.eval()
    if cache:
        with atomic_directory(target) as tmp:
            model.save_pretrained(tmp)
            (Path(tmp) / "losses.json").write_text(json.dumps({"recipe": recipe, "losses": losses}))
    return model, losses


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=REPRODUCTION_STEPS)
    parser.add_argument("--size", choices=("toy", "small"), default="small")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--response-length", type=int, default=REPRODUCTION_SPEC.response_length,
        help="answer tokens R (the issue asks for 32-64; the shipped fixture uses 8)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, help="also save_pretrained the model here")
    args = parser.parse_args(argv)
    if args.response_length < REPRODUCTION_SPEC.digits:
        raise ValueError(
            f"--response-length must be at least the {REPRODUCTION_SPEC.digits} answer digits, "
            f"got {args.response_length}"
        )
    spec = dataclasses.replace(REPRODUCTION_SPEC, response_length=args.response_length)
    model, losses = train_tiny_llada(
        args.steps, size=args.size, seed=args.seed, spec=spec, **REPRODUCTION_RECIPE
    )
    if args.out:
        model.save_pretrained(args.out)
    print(f"final loss {sum(losses[-20:]) / min(20, len(losses)):.4f} after {len(losses)} steps")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
