"""Train (or load from the cache) a tiny Llama LM: causal or LLaDA-style masked diffusion."""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import torch
import torch.nn.functional as F

from shared_core.cli import progress
from shared_core.data.batches import lm_batches
from shared_core.data.cache import atomic_directory, cache_dir, recipe_hash
from shared_core.data.text import stdlib_corpus, train_val_split
from shared_core.data.tokenizer import bpe_tokenizer
from shared_core.models.tiny import load_model, tiny_llama, tiny_llama_config

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerFast

Objective = Literal["causal", "masked_diffusion"]
#: A generated task: ``(generator, batch_size, seq_len) -> int64 tensor (batch_size, seq_len)``
#: of token ids in ``[0, vocab_size)``, drawing all randomness from ``generator``.
BatchFn = Callable[[torch.Generator, int, int], torch.Tensor]

_OBJECTIVES = ("causal", "masked_diffusion")
_RECIPE_FORMAT = 1  # bump when the training procedure changes, so old caches are not reused
_MIN_MASK_PROB = 1e-3  # LLaDA samples t ~ U(eps, 1] so the 1/t weight stays bounded
_VAL_FRACTION = 0.1
_DONE_FILE = "losses.json"  # written last: its presence marks a complete cache entry


@dataclass
class TrainedLM:
    """Result of :func:`train_tiny_lm`.

    ``tokenizer`` is ``None`` for generated tasks. ``mask_token_id`` is the id used to
    corrupt inputs for masked diffusion (``None`` for a causal LM trained on a generated
    task). ``path`` is the cache folder (``None`` when ``cache=False``), loadable with
    :func:`~shared_core.models.load_model`.
    """

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerFast | None
    losses: list[float]
    path: Path | None
    from_cache: bool
    mask_token_id: int | None = None
    recipe: dict[str, Any] = field(default_factory=dict)


def _task_id(task: str | BatchFn, task_name: str | None, *, cache: bool) -> str:
    if isinstance(task, str):
        if task != "stdlib":
            raise ValueError(f"unknown task {task!r}; use 'stdlib' or a batch-generating callable")
        return "stdlib"
    if not callable(task):
        raise TypeError(f"task must be 'stdlib' or a callable, got {type(task).__name__}")
    if task_name is not None:
        return task_name
    if not cache:
        return "uncached"
    qualname = getattr(task, "__qualname__", "")
    if not qualname or "<" in qualname:
        # Lambdas and closures share a qualname, so it cannot key the cache.
        raise ValueError(
            f"cannot derive a cache key from task {task!r}; pass task_name= or cache=False"
        )
    return f"{task.__module__}.{qualname}"


def _stdlib_source(
    tokenizer: PreTrainedTokenizerFast, corpus_bytes: int, seed: int, batch_size: int, seq_len: int
) -> Iterator[torch.Tensor]:
    ids = tokenizer(stdlib_corpus(max_bytes=corpus_bytes, seed=0))["input_ids"]
    train_ids, _ = train_val_split(torch.tensor(ids, dtype=torch.long), _VAL_FRACTION)
    return lm_batches(train_ids, seq_len, batch_size, seed=seed)


def _generated_source(
    task: BatchFn, vocab_size: int, seed: int, batch_size: int, seq_len: int
) -> Iterator[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    while True:
        batch = task(generator, batch_size, seq_len)
        if batch.shape != (batch_size, seq_len) or batch.dtype != torch.long:
            raise ValueError(
                f"task must return an int64 tensor of shape {(batch_size, seq_len)}, "
                f"got {batch.dtype} {tuple(batch.shape)}"
            )
        if batch.min() < 0 or batch.max() >= vocab_size:
            raise ValueError(
                f"task returned ids outside [0, {vocab_size}): "
                f"min {batch.min().item()}, max {batch.max().item()}"
            )
        yield batch


def causal_lm_loss(model: Callable[..., Any], ids: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy of ``model`` on ``ids`` (batch, seq_len).

    ``model`` is any callable taking ``input_ids=`` and returning an object with ``.logits``.
    """
    logits = model(input_ids=ids[:, :-1]).logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def masked_diffusion_loss(
    model: Callable[..., Any], ids: torch.Tensor, mask_token_id: int, generator: torch.Generator
) -> torch.Tensor:
    """LLaDA pre-training loss on clean ``ids`` (batch, seq_len).

    Per sequence, draw ``t ~ U(eps, 1]``; replace each token by ``mask_token_id`` with
    probability ``t``; the loss is the cross-entropy on masked positions weighted by
    ``1/t``, summed and divided by ``batch * seq_len`` (an upper bound on the negative
    log-likelihood). Noise comes from ``generator`` (a CPU generator) for reproducibility;
    ``model`` is called as in :func:`causal_lm_loss`.
    """
    batch, length = ids.shape
    t = (1 - _MIN_MASK_PROB) * torch.rand(batch, generator=generator) + _MIN_MASK_PROB
    p_mask = t[:, None].expand(batch, length).to(ids.device)
    masked = torch.rand(batch, length, generator=generator).to(ids.device) < p_mask
    noisy = torch.where(masked, torch.full_like(ids, mask_token_id), ids)
    logits = model(input_ids=noisy).logits
    token_loss = F.cross_entropy(logits[masked], ids[masked], reduction="none") / p_mask[masked]
    return token_loss.sum() / (batch * length)


def _move(module: torch.nn.Module, device: str | torch.device) -> None:
    # nn.Module.to works in place; calling it through a Module-typed name avoids the
    # decorated PreTrainedModel.to signature that confuses type checkers.
    module.to(device)


def _lr_lambda(steps: int) -> Callable[[int], float]:
    warmup = max(1, min(50, steps // 10))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        # Cosine decay to 10% of the peak: steadier final losses for short runs.
        progress = (step - warmup) / max(1, steps - warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))

    return factor


def train_tiny_lm(
    task: str | BatchFn = "stdlib",
    *,
    steps: int = 200,
    seed: int = 0,
    bidirectional: bool | None = None,
    objective: Objective = "causal",
    vocab_size: int | None = None,
    config_overrides: Mapping[str, Any] | None = None,
    batch_size: int = 32,
    seq_len: int = 128,
    lr: float = 3e-3,
    corpus_bytes: int = 1_000_000,
    task_name: str | None = None,
    device: str | torch.device = "cpu",
    cache: bool = True,
) -> TrainedLM:
    """Train a tiny Llama LM deterministically, or load the identical run from the cache.

    Tasks:
        * ``"stdlib"``: the standard-library corpus (:func:`~shared_core.data.stdlib_corpus`
          of ``corpus_bytes``) tokenized by :func:`~shared_core.data.bpe_tokenizer` with
          ``vocab_size`` (default 512). Training uses the first 90% of the token stream;
          the last 10% (``train_val_split(ids, 0.1)[1]``) is never seen.
        * a callable :data:`BatchFn` ``(generator, batch_size, seq_len) -> ids`` for generated
          tasks; ``vocab_size`` (ids lie in ``[0, vocab_size)``) is then required. For
          masked diffusion one extra token, id ``vocab_size``, is added as the mask.

    Objectives: ``"causal"`` (next-token cross-entropy) or ``"masked_diffusion"``
    (:func:`masked_diffusion_loss`, LLaDA). ``bidirectional`` defaults to the objective's
    natural choice (causal: ``False``; masked diffusion: ``True``); a bidirectional model
    cannot be trained causally, since it would see the token it must predict.

    ``config_overrides`` go to :func:`~shared_core.models.tiny_llama_config` (e.g.
    ``hidden_size``, ``num_layers``). The model is saved under ``cache_dir("tiny-lm")``,
    keyed by a hash of everything above except ``device``; a later call with the same
    recipe loads it (``from_cache=True``). The entry is written to a temporary folder and
    renamed, so an interrupted run leaves no corrupt cache. The global RNG is untouched.
    """
    if objective not in _OBJECTIVES:
        raise ValueError(f"objective must be one of {_OBJECTIVES}, got {objective!r}")
    if bidirectional is None:
        bidirectional = objective == "masked_diffusion"
    if bidirectional and objective == "causal":
        raise ValueError(
            "a bidirectional model cannot use the causal objective: it sees its target"
        )
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    task_id = _task_id(task, task_name, cache=cache)
    if isinstance(task, str):
        vocab_size = 512 if vocab_size is None else vocab_size
    elif vocab_size is None:
        raise ValueError("a generated task needs vocab_size= (its ids lie in [0, vocab_size))")

    recipe: dict[str, Any] = {
        "format": _RECIPE_FORMAT,
        "task": task_id,
        "objective": objective,
        "bidirectional": bidirectional,
        "steps": steps,
        "seed": seed,
        "vocab_size": vocab_size,
        "config_overrides": dict(config_overrides or {}),
        "batch_size": batch_size,
        "seq_len": seq_len,
        "lr": lr,
    }
    if isinstance(task, str):
        # The corpus, hence the tokenizer and the data, depend on the interpreter's stdlib.
        recipe |= {"corpus_bytes": corpus_bytes, "python": list(sys.version_info[:3])}

    path: Path | None = None
    if cache:
        slug = re.sub(r"[^A-Za-z0-9]+", "-", task_id).strip("-")[-40:]
        path = cache_dir("tiny-lm") / f"{slug}-{objective}-{recipe_hash(recipe)}"
        if (path / _DONE_FILE).is_file():
            return _load_cached(path, recipe, device)

    tokenizer: PreTrainedTokenizerFast | None = None
    if isinstance(task, str):
        # The corpus and tokenizer are part of the task, fixed at seed 0, so runs that
        # differ only in `seed` (init and batch order) share them.
        tokenizer = bpe_tokenizer(vocab_size, corpus_bytes=corpus_bytes, seed=0)
        model_vocab = len(tokenizer)
        mask_token_id: int | None = tokenizer.mask_token_id
        batches = _stdlib_source(tokenizer, corpus_bytes, seed, batch_size, seq_len)
    else:
        is_diffusion = objective == "masked_diffusion"
        model_vocab = vocab_size + 1 if is_diffusion else vocab_size
        mask_token_id = vocab_size if is_diffusion else None
        batches = _generated_source(task, vocab_size, seed, batch_size, seq_len)

    overrides = dict(config_overrides or {})
    overrides.setdefault("max_position_embeddings", max(seq_len, 256))
    config = tiny_llama_config(model_vocab, **overrides)
    model = tiny_llama(config, bidirectional=bidirectional, seed=seed)
    _move(model, device)
    losses = _optimise(model, batches, objective, mask_token_id, steps=steps, lr=lr, seed=seed)
    model.eval()

    if path is not None:
        with atomic_directory(path) as tmp:
            model.save_pretrained(tmp)
            if tokenizer is not None:
                tokenizer.save_pretrained(tmp)
            meta = {"recipe": recipe, "mask_token_id": mask_token_id}
            (tmp / "recipe.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
            (tmp / _DONE_FILE).write_text(json.dumps(losses))
    return TrainedLM(model, tokenizer, losses, path, False, mask_token_id, recipe)


def _optimise(
    model: PreTrainedModel,
    batches: Iterator[torch.Tensor],
    objective: Objective,
    mask_token_id: int | None,
    *,
    steps: int,
    lr: float,
    seed: int,
) -> list[float]:
    device = next(model.parameters()).device
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _lr_lambda(steps))
    noise = torch.Generator().manual_seed(seed + 1)
    losses: list[float] = []
    model.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # nothing should draw from it (no dropout), but pin it anyway
        bar = progress(
            range(steps), desc=f"training tiny LM ({objective})", unit="step", leave=False
        )
        for _ in bar:
            ids = next(batches).to(device)
            if objective == "causal":
                loss = causal_lm_loss(model, ids)
            else:
                assert mask_token_id is not None  # set for every masked-diffusion task above
                loss = masked_diffusion_loss(model, ids, mask_token_id, noise)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
            bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
    return losses


def _load_cached(path: Path, recipe: dict[str, Any], device: str | torch.device) -> TrainedLM:
    from transformers import PreTrainedTokenizerFast

    model = load_model(path).eval()
    _move(model, device)
    tokenizer = (
        PreTrainedTokenizerFast.from_pretrained(path)
        if (path / "tokenizer.json").is_file()
        else None
    )
    meta = json.loads((path / "recipe.json").read_text())
    losses = json.loads((path / _DONE_FILE).read_text())
    return TrainedLM(model, tokenizer, losses, path, True, meta["mask_token_id"], recipe)
