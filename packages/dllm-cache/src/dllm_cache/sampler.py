"""LLaDA's masked-diffusion sampler (``ML-GSAI/LLaDA`` ``generate.py``), with padding and a cache.

Semi-autoregressive: the response is split into blocks decoded left to right; in each of a block's
``steps / num_blocks`` steps the model predicts every masked token and the ``n_k`` most confident
masked positions of the current block are committed for good.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from dllm_cache.cache import DLLMCache

Remasking = Literal["low_confidence", "random"]


def num_transfer_tokens(mask_counts: Tensor, steps: int) -> Tensor:
    """Tokens committed per step (B×steps) for ``mask_counts`` masks per row: equal shares, the
    remainder going to the first steps (LLaDA's linear schedule)."""
    base = mask_counts // steps
    remainder = mask_counts % steps
    out = base.unsqueeze(1).expand(-1, steps).clone()
    out += (torch.arange(steps, device=mask_counts.device) < remainder.unsqueeze(1)).long()
    return out


def gumbel_argmax(
    logits: Tensor, temperature: float, generator: torch.Generator | None = None
) -> Tensor:
    """A draw from ``softmax(logits / temperature)`` by the Gumbel-max trick (argmax at 0).

    LLaDA computes ``argmax exp(logits) / (-log u)^τ`` in float64; this is the same argmax in
    log space, ``logits - τ log(-log u)``, which cannot overflow.
    """
    if temperature == 0:
        return logits.argmax(-1)
    u = torch.rand(logits.shape, generator=generator, dtype=torch.float64, device=logits.device)
    return (logits.double() - temperature * torch.log(-torch.log(u))).argmax(-1)


def _accepts_logits_to_keep(model: nn.Module) -> bool:
    try:
        return "logits_to_keep" in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


@torch.no_grad()
def generate(
    model: nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor | None = None,
    *,
    mask_id: int,
    gen_length: int = 128,
    block_length: int = 128,
    steps: int = 128,
    temperature: float = 0.0,
    cfg_scale: float = 0.0,
    remasking: Remasking = "low_confidence",
    cache: DLLMCache | None = None,
    pad_token_id: int | None = None,
    generator: torch.Generator | None = None,
    response_logits_only: bool | None = None,
    logits_eos_inf: bool = False,
    confidence_eos_eot_inf: bool = False,
    eos_token_id: int | None = None,
    eot_token_id: int | None = None,
) -> Tensor:
    """Sample ``gen_length`` tokens after each prompt row of ``input_ids`` (B×P); returns B×gen_length.

    Prompts of different lengths are left-padded with ``attention_mask`` (B×P, 0 = padding), which
    the model and the cache honour. ``cache``: the ``handle.cache`` of :func:`apply_dllm_cache`
    on this model (``None`` runs uncached). ``response_logits_only`` computes logits for the
    response only (default: when the model's forward takes ``logits_to_keep``); sampling only
    reads those.

    LLaDA's optional flags: ``logits_eos_inf`` never samples ``eos_token_id`` (its logit is set
    to −inf); ``confidence_eos_eot_inf`` gives candidates equal to ``eos_token_id`` or
    ``eot_token_id`` the lowest confidence, 0, so they are committed last. ``eos_token_id``
    defaults to ``model.config.eos_token_id``; LLaDA-8B's are 126081 (EOS) and 126348 (EoT).
    """
    if (
        not isinstance(input_ids, Tensor)
        or input_ids.ndim != 2
        or input_ids.dtype not in (torch.long, torch.int)
    ):
        raise ValueError("input_ids must be an integer tensor of shape (batch, prompt_length)")
    B, P = input_ids.shape
    if P < 1:
        raise ValueError("the prompt needs at least one token")
    _check_int("gen_length", gen_length, 1)
    _check_int("block_length", block_length, 1)
    _check_int("steps", steps, 1)
    if gen_length % block_length:
        raise ValueError(
            f"gen_length={gen_length} is not a multiple of block_length={block_length}"
        )
    num_blocks = gen_length // block_length
    if steps % num_blocks:
        raise ValueError(
            f"steps={steps} is not a multiple of the number of blocks "
            f"gen_length/block_length={num_blocks} (gen_length={gen_length}, block_length={block_length})"
        )
    if steps > gen_length:
        warnings.warn(
            f"steps={steps} > gen_length={gen_length}: some steps commit no token", stacklevel=2
        )
    if remasking not in ("low_confidence", "random"):
        raise ValueError(f"remasking must be 'low_confidence' or 'random', got {remasking!r}")
    if temperature < 0 or cfg_scale < 0:
        raise ValueError(
            f"temperature and cfg_scale must be >= 0, got {temperature} and {cfg_scale}"
        )
    if pad_token_id is None:
        pad_token_id = getattr(getattr(model, "config", None), "pad_token_id", None)
    if pad_token_id is not None and mask_id == pad_token_id:
        raise ValueError(
            f"mask_id={mask_id} equals pad_token_id; the sampler cannot tell them apart"
        )
    if bool((input_ids == mask_id).any()):
        raise ValueError(
            f"the prompt contains mask_id={mask_id}; masks belong to the response only"
        )
    special: list[int] = []
    if logits_eos_inf or confidence_eos_eot_inf:
        if eos_token_id is None:
            eos_token_id = getattr(getattr(model, "config", None), "eos_token_id", None)
        if not isinstance(eos_token_id, int):
            raise ValueError(
                "logits_eos_inf / confidence_eos_eot_inf need eos_token_id (an int); got "
                f"{eos_token_id!r} and the model's config has none"
            )
        special = [eos_token_id] + ([eot_token_id] if eot_token_id is not None else [])
    full_mask: Tensor | None = None
    if attention_mask is not None:
        if attention_mask.shape != input_ids.shape:
            raise ValueError(
                f"attention_mask must have the prompt's shape {tuple(input_ids.shape)}, "
                f"got {tuple(attention_mask.shape)}"
            )
        if bool((attention_mask[:, -1] == 0).any()):
            raise ValueError(
                "pad prompts on the left: the response must follow the last prompt token"
            )
        full_mask = torch.cat([attention_mask, attention_mask.new_ones(B, gen_length)], 1)
        if bool(full_mask.all()):
            full_mask = None
    if cache is not None and getattr(cache, "_installed_on", None) is not model:
        raise ValueError(
            "cache is not installed on this model: pass apply_dllm_cache(model, ...).cache"
        )
    if response_logits_only is None:
        response_logits_only = _accepts_logits_to_keep(model)
    extra = {"logits_to_keep": gen_length} if response_logits_only else {}

    def logits_of(x: Tensor) -> Tensor:
        kwargs: dict[str, Any] = dict(extra)
        if full_mask is not None:
            kwargs["attention_mask"] = full_mask.repeat(x.shape[0] // B, 1)
        return model(x, **kwargs).logits[:, -gen_length:]

    x = torch.cat([input_ids.long(), input_ids.new_full((B, gen_length), mask_id).long()], 1)
    if cache is not None:
        cache.reset(P, full_mask)
    try:
        step = 0
        for b in range(num_blocks):
            lo, hi = b * block_length, (b + 1) * block_length
            counts = num_transfer_tokens(
                (x[:, P + lo : P + hi] == mask_id).sum(1), steps // num_blocks
            )
            for i in range(steps // num_blocks):
                step += 1
                resp = x[:, P:]
                masked = resp == mask_id
                logits = _guided_logits(x, P, step, cfg_scale, mask_id, cache, logits_of)
                # A committed MASK would stay masked for good; LLaDA relies on the trained model
                # never predicting it, we rule it out.
                logits[..., mask_id] = -torch.inf
                if logits_eos_inf:
                    logits[..., special[0]] = -torch.inf
                x0 = gumbel_argmax(logits, temperature, generator)
                if remasking == "low_confidence":
                    p = F.softmax(logits.double(), dim=-1)
                    conf = torch.gather(p, -1, x0.unsqueeze(-1)).squeeze(-1)
                else:
                    conf = torch.rand(
                        x0.shape, generator=generator, dtype=torch.float64, device=x.device
                    )
                if confidence_eos_eot_inf:
                    # 0, not -inf: a -inf would tie with the positions outside the block.
                    conf = conf.masked_fill(torch.isin(x0, x0.new_tensor(special)), 0.0)
                conf[:, hi:] = -torch.inf  # nothing right of the current block
                conf = torch.where(masked, conf, -torch.inf)
                x0 = torch.where(masked, x0, resp)
                commit = torch.zeros_like(masked)
                for row in range(B):
                    n = int(counts[row, i])
                    if n:
                        commit[row, torch.topk(conf[row], n).indices] = True
                x[:, P:] = torch.where(commit, x0, resp)
    finally:
        if cache is not None:
            cache.release()
    return x[:, P:]


def _guided_logits(
    x: Tensor,
    P: int,
    step: int,
    cfg_scale: float,
    mask_id: int,
    cache: DLLMCache | None,
    logits_of: Callable[[Tensor], Tensor],
) -> Tensor:
    """Response logits, with classifier-free guidance ``un + (w + 1)(cond - un)`` when ``w > 0``.

    Uncached, the conditional and unconditional inputs go through the model as one batch, as in
    LLaDA. Cached, each has its own feature stream, and the residual ``cond - un`` is reused
    between refreshes (step ``t`` refreshes when ``(t - 1) % cfg_interval == 0`` or ``t <= 5``).
    """
    if cfg_scale == 0:
        return logits_of(x)
    un_x = x.clone()
    un_x[:, :P] = mask_id
    if cache is None:
        both = logits_of(torch.cat([x, un_x], 0))
        cond, un = both.chunk(2)
        return un + (cfg_scale + 1) * (cond - un)
    cond = logits_of(x)
    k = cache.config.cfg_interval
    if cache.cfg_residual is None or (step - 1) % k == 0 or step <= 5:
        with cache.stream("uncond"):
            cache.cfg_residual = cond - logits_of(un_x)
    return cond + cfg_scale * cache.cfg_residual
