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
    _check_int("steps", steps, 1)
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


def _vocab_size(model: nn.Module) -> int | None:
    size = getattr(getattr(model, "config", None), "vocab_size", None)
    if isinstance(size, int):
        return size
    get = getattr(model, "get_input_embeddings", None)
    emb = get() if callable(get) else None
    return getattr(emb, "num_embeddings", None)


def commit_parallel(
    conf: Tensor,
    masked_in_block: Tensor,
    threshold: float | None,
    factor: float | None,
) -> Tensor:
    """Fast-dLLM's confidence-aware parallel decoding: which masked positions to commit (B×R bool).

    ``threshold``: every masked position of the current block whose confidence is at least
    ``threshold``, and at least the most confident one. ``factor``: with the block's confidences
    sorted, ``c_(1) >= c_(2) >= ...``, commit the first ``n`` where ``n`` is the first rank whose
    ``c_(n+1) < 1 - factor / (n + 2)`` (rank 1 always passes); as in Fast-dLLM, a run that stops
    at the last rank (or passes them all) commits every masked position of the block.
    """
    commit = torch.zeros_like(masked_in_block)
    for row in range(conf.shape[0]):
        m = int(masked_in_block[row].sum())
        if m == 0:
            continue
        order = torch.topk(conf[row], m)
        if threshold is not None:
            n = max(1, int((order.values >= threshold).sum()))
        else:
            assert factor is not None
            bars = [-1.0] + [1 - factor / (k + 1) for k in range(2, m + 1)]
            n = next((i for i in range(m) if float(order.values[i]) < bars[i]), m - 1)
            if n in (0, m - 1):
                n += 1
        commit[row, order.indices[:n]] = True
    return commit


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
    return_full_sequence: bool = False,
    shift_logits: bool | None = None,
    threshold: float | None = None,
    factor: float | None = None,
) -> Tensor:
    """Sample ``gen_length`` tokens after each prompt row of ``input_ids`` (B×P).

    Returns the response only, B×gen_length, unless ``return_full_sequence=True`` (then
    B×(P + gen_length), prompt included, as LLaDA's own ``generate`` returns).

    Prompts of different lengths are left-padded with ``attention_mask`` (B×P, 0 = padding), which
    the model and the cache honour. ``cache``: the ``handle.cache`` of :func:`apply_dllm_cache`
    on this model (``None`` runs uncached). ``response_logits_only`` computes logits for the
    response only (default: when the model's forward takes ``logits_to_keep``); sampling only
    reads those.

    LLaDA's optional flags: ``logits_eos_inf`` never samples ``eos_token_id`` (its logit is set
    to −inf); ``confidence_eos_eot_inf`` gives candidates equal to ``eos_token_id`` or
    ``eot_token_id`` the lowest confidence, 0, so they are committed last. ``eos_token_id``
    defaults to ``model.config.eos_token_id``; LLaDA-8B's are 126081 (EOS) and 126348 (EoT).

    ``shift_logits``: the logits at position ``i`` predict token ``i + 1`` (Dream, initialised
    from an autoregressive model, does ``logits = cat(logits[:, :1], logits[:, :-1])``); default:
    when ``model.config.model_type`` names Dream. :func:`~dllm_cache.dream.dream_generate` is
    Dream's own sampler (its schedule and remasking).

    Fast-dLLM's parallel decoding (its ``generate``'s names): ``threshold`` commits every masked
    token of the current block whose confidence reaches it (at least one per step) and
    ``factor`` uses its factor rule (:func:`commit_parallel`); a block then takes as many steps
    as it needs (``steps`` sets only the cap of the usual schedule). Give at most one.
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
    for name, value in (("temperature", temperature), ("cfg_scale", cfg_scale)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise ValueError(f"{name} must be a number >= 0, got {value!r}")
        if value == float("inf"):
            raise ValueError(f"{name} must be finite, got {value!r}")
    if threshold is not None and factor is not None:
        raise ValueError("give threshold or factor (Fast-dLLM's two rules), not both")
    if threshold is not None and not (isinstance(threshold, (int, float)) and 0 <= threshold <= 1):
        raise ValueError(f"threshold must be a confidence in [0, 1], got {threshold!r}")
    if factor is not None and not (isinstance(factor, (int, float)) and factor > 0):
        raise ValueError(f"factor must be a number > 0, got {factor!r}")
    vocab = _vocab_size(model)
    if isinstance(mask_id, bool) or not isinstance(mask_id, int):
        raise ValueError(f"mask_id must be an int, got {mask_id!r}")
    if vocab is not None and not 0 <= mask_id < vocab:
        raise ValueError(f"mask_id={mask_id} is outside the model's vocabulary [0, {vocab})")
    if vocab is not None and bool(((input_ids < 0) | (input_ids >= vocab)).any()):
        raise ValueError(f"input_ids hold ids outside the model's vocabulary [0, {vocab})")
    if shift_logits is None:
        model_type = str(getattr(getattr(model, "config", None), "model_type", ""))
        shift_logits = "dream" in model_type.lower()
    shift = int(bool(shift_logits))
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
    # Dream's logits are shifted one position: the response needs the rows P-1 .. T-2.
    rows = gen_length + shift
    keep_kwarg = _accepts_logits_to_keep(model)
    if response_logits_only is None:
        response_logits_only = keep_kwarg or cache is not None
    extra = {"logits_to_keep": rows} if response_logits_only and keep_kwarg else {}

    def logits_of(x: Tensor) -> Tensor:
        kwargs: dict[str, Any] = dict(extra)
        if full_mask is not None:
            kwargs["attention_mask"] = full_mask.repeat(x.shape[0] // B, 1)
        logits = model(x, **kwargs).logits[:, -rows:]
        return logits[:, :gen_length] if shift else logits

    x = torch.cat([input_ids.long(), input_ids.new_full((B, gen_length), mask_id).long()], 1)
    parallel = threshold is not None or factor is not None
    if cache is not None:
        cache.reset(P, full_mask, mask_id=mask_id)
        if response_logits_only and not keep_kwarg:
            cache.head_rows = rows  # the adapter's head input then runs on these rows only
    try:
        step = 0
        for b in range(num_blocks):
            lo, hi = b * block_length, (b + 1) * block_length
            counts = num_transfer_tokens(
                (x[:, P + lo : P + hi] == mask_id).sum(1), steps // num_blocks
            )
            i = -1
            while True:
                i += 1
                if parallel:
                    if not bool((x[:, P + lo : P + hi] == mask_id).any()):
                        break
                elif i == steps // num_blocks:
                    break
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
                if parallel:
                    in_block = masked.clone()
                    in_block[:, :lo] = False
                    in_block[:, hi:] = False
                    commit = commit_parallel(conf, in_block, threshold, factor)
                else:
                    commit = torch.zeros_like(masked)
                    for row in range(B):
                        n = int(counts[row, i])
                        if n:
                            commit[row, torch.topk(conf[row], n).indices] = True
                x[:, P:] = torch.where(commit, x0, resp)
    finally:
        if cache is not None:
            cache.release()
    return x if return_full_sequence else x[:, P:]


def llada_generate(
    model: nn.Module,
    prompt: Tensor,
    steps: int = 128,
    gen_length: int = 128,
    block_length: int = 128,
    temperature: float = 0.0,
    cfg_scale: float = 0.0,
    remasking: Remasking = "low_confidence",
    mask_id: int = 126336,
    **kwargs: Any,
) -> Tensor:
    """LLaDA's ``generate`` signature, argument order and defaults (``mask_id=126336``), returning
    the whole sequence as it does; keyword arguments of :func:`generate` (``cache=``,
    ``attention_mask=``, ``threshold=`` ...) pass through."""
    kwargs.setdefault("return_full_sequence", True)
    return generate(
        model, prompt, kwargs.pop("attention_mask", None), mask_id=mask_id, gen_length=gen_length,
        block_length=block_length, steps=steps, temperature=temperature, cfg_scale=cfg_scale,
        remasking=remasking, **kwargs,
    )  # fmt: skip


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
