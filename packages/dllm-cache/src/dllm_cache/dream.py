"""Dream's sampler (``Dream-org/Dream-v0-*`` ``diffusion_generate``), with a dLLM-Cache.

Dream is initialised from an autoregressive model, so its logits at position ``i`` predict token
``i + 1``: every step shifts them one position right, ``logits = cat(logits[:, :1],
logits[:, :-1])``. Its schedule runs over the whole response (no blocks) on the time grid
``t_i = linspace(1, eps, steps + 1)``: step ``i`` commits ``int(m (1 - t_{i+1} / t_i))`` of the
``m`` masked tokens (all of them on the last step), ranked by the ``alg``'s confidence:

- ``"origin"``: every masked token is committed with probability ``1 - t_{i+1} / t_i``;
- ``"maskgit_plus"``: the probability of the sampled token;
- ``"topk_margin"``: top-1 minus top-2 probability;
- ``"entropy"``: the negative entropy of the token's distribution.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from dllm_cache.cache import DLLMCache

DreamAlg = Literal["origin", "maskgit_plus", "topk_margin", "entropy"]
DREAM_ALGS: tuple[str, ...] = ("origin", "maskgit_plus", "topk_margin", "entropy")
Confidence = Literal["prob", "margin", "neg_entropy"]


def shift_logits(logits: Tensor) -> Tensor:
    """Dream's one-position shift: the logits of position ``i`` become those of ``i - 1``."""
    return torch.cat([logits[:, :1], logits[:, :-1]], dim=1)


def _filter(logits: Tensor, top_p: float | None, top_k: int | None) -> Tensor:
    """Nucleus and top-k filtering as Dream does it (the removed logits become the dtype's min)."""
    low = torch.finfo(logits.dtype).min
    if top_p is not None and top_p < 1:
        sorted_logits, order = torch.sort(logits, descending=True)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        remove = cum > top_p
        remove[..., 1:] = remove[..., :-1].clone()  # keep the first token above the threshold
        remove[..., 0] = False
        logits = logits.masked_fill(torch.zeros_like(remove).scatter(-1, order, remove), low)
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1]))[0][..., -1, None]
        logits = logits.masked_fill(logits < kth, low)
    return logits


def sample_tokens(
    logits: Tensor,
    temperature: float = 0.0,
    top_p: float | None = None,
    top_k: int | None = None,
    confidence: Confidence = "prob",
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """``(confidence, token)`` per row of ``logits`` (n×V), as Dream's ``sample_tokens``."""
    if temperature > 0:
        logits = logits / temperature
    probs = _filter(logits, top_p, top_k).softmax(-1)
    if temperature > 0:
        x0 = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        conf = probs.gather(-1, x0[:, None]).squeeze(-1)
    else:
        conf, x0 = probs.max(-1)
    if confidence == "margin":
        top2 = probs.topk(2, dim=-1).values
        conf = top2[:, 0] - top2[:, 1]
    elif confidence == "neg_entropy":
        conf = (probs * torch.log(probs + 1e-10)).sum(-1)
    return conf, x0


@torch.no_grad()
def dream_generate(
    model: nn.Module,
    input_ids: Tensor,
    *,
    mask_id: int,
    max_new_tokens: int = 128,
    steps: int = 128,
    temperature: float = 0.0,
    top_p: float | None = None,
    top_k: int | None = None,
    alg: DreamAlg = "origin",
    alg_temp: float | None = None,
    eps: float = 1e-3,
    cache: DLLMCache | None = None,
    generator: torch.Generator | None = None,
    return_full_sequence: bool = False,
) -> Tensor:
    """Dream's ``diffusion_generate`` for unpadded prompts ``input_ids`` (B×P); returns the
    response (B×max_new_tokens) or, with ``return_full_sequence``, the whole sequence as Dream does.

    ``cache``: the ``handle.cache`` of ``apply_dllm_cache(model, config, adapter="dream")``.
    Random draws (``"origin"``'s coin flips, ``temperature > 0``, ``alg_temp``) use ``generator``.
    """
    if not isinstance(input_ids, Tensor) or input_ids.ndim != 2 or input_ids.shape[1] < 1:
        raise ValueError("input_ids must be an integer tensor of shape (batch, prompt_length >= 1)")
    for name, value in (("max_new_tokens", max_new_tokens), ("steps", steps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    if alg not in DREAM_ALGS:
        raise ValueError(f"alg must be one of {DREAM_ALGS}, got {alg!r}")
    if not (isinstance(temperature, (int, float)) and 0 <= temperature < float("inf")):
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if not 0 < eps < 1:
        raise ValueError(f"eps must be in (0, 1), got {eps!r}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1] or None, got {top_p!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be an int >= 1 or None, got {top_k!r}")
    if bool((input_ids == mask_id).any()):
        raise ValueError(
            f"the prompt contains mask_id={mask_id}; masks belong to the response only"
        )
    if cache is not None and getattr(cache, "_installed_on", None) is not model:
        raise ValueError(
            "cache is not installed on this model: pass apply_dllm_cache(model, ...).cache"
        )
    B, P = input_ids.shape
    x = F.pad(input_ids.long(), (0, max_new_tokens), value=mask_id)
    grid = torch.linspace(1, eps, steps + 1, device=x.device)
    kinds: dict[str, Confidence] = {"topk_margin": "margin", "entropy": "neg_entropy"}
    kind: Confidence = kinds.get(alg, "prob")
    if cache is not None:
        cache.reset(P, mask_id=mask_id)
    try:
        for i in range(steps):
            masked = x == mask_id
            logits = shift_logits(model(x).logits)
            mask_logits = logits[masked]
            t, s = grid[i], grid[i + 1]
            if alg == "origin":
                p_transfer = float(1 - s / t) if i < steps - 1 else 1.0
                x0 = torch.full_like(x[masked], mask_id)
                go = torch.rand(x0.shape, generator=generator, device=x.device) < p_transfer
                x0[go] = sample_tokens(
                    mask_logits[go], temperature, top_p, top_k, generator=generator
                )[1]
                x[masked] = x0
                continue
            conf, x0 = sample_tokens(mask_logits, temperature, top_p, top_k, kind, generator)
            # Dream takes the batch's mean mask count (its prompts are unpadded, so all equal)
            n_masked = float(masked.sum()) / B
            n = int(n_masked * float(1 - s / t)) if i < steps - 1 else int(n_masked)
            if n <= 0:
                continue
            full_conf = torch.full(x.shape, -torch.inf, dtype=logits.dtype, device=x.device)
            full_conf[masked] = conf.to(logits.dtype)
            if alg_temp is None or alg_temp == 0:
                chosen = torch.topk(full_conf, n).indices
            else:
                weights = F.softmax(full_conf / alg_temp, dim=-1)
                chosen = torch.multinomial(weights, n, generator=generator)
            candidate = torch.full_like(x, mask_id)
            candidate[masked] = x0
            rows = torch.arange(B, device=x.device).unsqueeze(1).expand_as(chosen)
            x[rows, chosen] = candidate[rows, chosen]
    finally:
        if cache is not None:
            cache.release()
    return x if return_full_sequence else x[:, P:]
