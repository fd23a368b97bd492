"""A Hugging Face causal LM as a :class:`~cars_sampling.lm.NextTokenLM`, reusing KV caches across attempts.

The official code re-runs ``generate`` for every attempt, recomputing the whole prefix. Here every
prefix the sampler asks about keeps the key/value slice of its last token, so a new trie node costs
one token of compute: the cache of its parent path is rebuilt from stored slices (or kept as is when
the new prefix extends the previous one, the common case within an attempt).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import torch

KVSlice = list[tuple[torch.Tensor, torch.Tensor]]  # per layer: (key, value) of one position


def _dynamic_cache() -> Any:
    from transformers import DynamicCache

    return DynamicCache()


def _layers_kv(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    if hasattr(cache, "layers"):  # transformers >= 4.56
        return [(layer.keys, layer.values) for layer in cache.layers]
    return list(zip(cache.key_cache, cache.value_cache, strict=True))


class TransformersLM:
    """Next-token log-probs from a ``transformers`` causal LM, with prefix KV-cache reuse.

    ``vocab_size`` is the model's number of logits. When it exceeds ``len(tokenizer)`` (padded
    embedding rows), the extra ids are not tokens and get probability 0; a tokenizer larger than
    the logits is an error. ``add_bos`` (default: when the tokenizer has a BOS token) prepends
    BOS to every context that does not start with it. ``reuse_kv=False`` recomputes every prefix
    from scratch (the official code's cost), for comparison. ``tokens_computed`` counts token
    positions run through the model; ``forward_calls`` counts model calls.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        reuse_kv: bool = True,
        add_bos: bool | None = None,
        max_cached_tokens: int = 200_000,
    ) -> None:
        self.model = model.eval()
        out_emb = model.get_output_embeddings()
        n_logits = (
            int(out_emb.weight.shape[0]) if out_emb is not None else int(model.config.vocab_size)
        )
        self.n_tokens = n_logits
        if tokenizer is not None:
            n_tok = len(tokenizer)
            if n_tok > n_logits:
                raise ValueError(
                    f"vocabulary mismatch: the tokenizer has {n_tok} tokens but the model gives only "
                    f"{n_logits} logits; use the tokenizer that belongs to this model"
                )
            self.n_tokens = n_tok
        self.vocab_size = n_logits
        self.tokenizer = tokenizer
        bos = getattr(tokenizer, "bos_token_id", None) if tokenizer is not None else None
        self.bos_token_id = bos if (add_bos is None or add_bos) else None
        if add_bos and bos is None:
            raise ValueError("add_bos=True but the tokenizer has no bos_token_id")
        self.reuse_kv = reuse_kv
        self.max_cached_tokens = max_cached_tokens
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self.device = next(model.parameters()).device
        self.forward_calls = 0
        self.tokens_computed = 0
        self.clear_cache()

    def clear_cache(self) -> None:
        """Forget every stored KV slice (memory is freed; results are unchanged)."""
        self._slices: dict[tuple[int, ...], KVSlice] = {}
        self._cache: Any = None
        self._cache_ids: tuple[int, ...] = ()

    def new_attempt(self) -> None:
        """Forget the KV slices of earlier attempts, as a fresh ``generate`` call does.

        The sampler calls it at each attempt when ``prefix_cache=False`` (the paper's regime):
        the cache then only spans one attempt, prompt prefill included.
        """
        self.clear_cache()

    def context(self, prefix_ids: Sequence[int]) -> list[int]:
        """The ids the model actually sees for ``prefix_ids`` (BOS prepended when configured)."""
        ids = [int(t) for t in prefix_ids]
        if self.bos_token_id is not None and (not ids or ids[0] != self.bos_token_id):
            ids.insert(0, self.bos_token_id)
        if not ids:
            raise ValueError(
                "empty context: give a non-empty prompt or a tokenizer with a BOS token"
            )
        return ids

    def _forward(self, ids: Sequence[int], cache: Any) -> torch.Tensor:
        x = torch.tensor([list(ids)], device=self.device)
        self.forward_calls += 1
        self.tokens_computed += len(ids)
        with torch.no_grad():
            out = self.model(input_ids=x, use_cache=cache is not None, **{self._cache_kw: cache})
        return out.logits[0, -1]

    def _finish(self, logits: torch.Tensor) -> torch.Tensor:
        logits = logits.float().cpu()
        if self.n_tokens < self.vocab_size:  # padded rows are not tokens
            logits[self.n_tokens :] = -torch.inf
        return torch.log_softmax(logits, -1)

    def logprobs(self, prefix_ids: Sequence[int]) -> torch.Tensor:
        ids = tuple(self.context(prefix_ids))
        if not self.reuse_kv:
            return self._finish(self._forward(ids, None))
        ctx = ids[:-1]
        if self._cache is None or self._cache_ids != ctx:
            self._rebuild(ctx)
        logits = self._forward(ids[-1:], self._cache)
        self._store(ids, 1)
        self._cache_ids = ids
        return self._finish(logits)

    def _rebuild(self, ctx: tuple[int, ...]) -> None:
        """Make ``self._cache`` hold exactly ``ctx``: stored slices, then compute what is missing."""
        have = 0
        while have < len(ctx) and ctx[: have + 1] in self._slices:
            have += 1
        if len(self._slices) > self.max_cached_tokens:
            self._slices.clear()
            have = 0
        cache = _dynamic_cache()
        if have:
            path = [self._slices[ctx[: j + 1]] for j in range(have)]
            for layer in range(len(path[0])):
                cache.update(
                    torch.cat([s[layer][0] for s in path], dim=-2),
                    torch.cat([s[layer][1] for s in path], dim=-2),
                    layer,
                )
        self._cache = cache
        if have < len(ctx):
            self._forward(ctx[have:], cache)
            self._store(ctx, len(ctx) - have)
        self._cache_ids = ctx

    def _store(self, ids: tuple[int, ...], n_new: int) -> None:
        kv = _layers_kv(self._cache)
        total = len(ids)
        for j in range(total - n_new, total):
            self._slices[ids[: j + 1]] = [
                (k[..., j : j + 1, :].clone(), v[..., j : j + 1, :].clone()) for k, v in kv
            ]


def sequence_logprob(lm: TransformersLM, prompt_ids: Sequence[int], tokens: Sequence[int]) -> float:
    """``Σ log p(token_i | prompt, tokens_<i)`` by one teacher-forced forward (the oracle of raw_logprobs)."""
    ids = lm.context([*prompt_ids, *tokens])
    n = len(tokens)
    x = torch.tensor([ids], device=lm.device)
    with torch.no_grad():
        logits = lm.model(input_ids=x).logits[0].float().cpu()
    if lm.n_tokens < lm.vocab_size:
        logits[:, lm.n_tokens :] = -torch.inf
    logp = torch.log_softmax(logits, -1)
    positions = range(len(ids) - n - 1, len(ids) - 1)
    return float(sum(logp[p, t] for p, t in zip(positions, tokens, strict=True)))


def stop_token_ids(model: Any, tokenizer: Any = None) -> list[int]:
    """Every token id that ends generation: the tokenizer's EOS and the generation config's.

    Chat models often stop on several ids (e.g. ``<|eot_id|>`` besides ``<|end_of_text|>``); a
    constraint must know all of them, or a stop token would escape the grammar mid-string.
    """
    ids: set[int] = set()
    for source in (
        getattr(model, "generation_config", None),
        getattr(model, "config", None),
        tokenizer,
    ):
        value = getattr(source, "eos_token_id", None) if source is not None else None
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    if not ids:
        raise ValueError("neither the model nor the tokenizer names an EOS token; pass the ids")
    return sorted(ids)


def chat_prompt_ids(tokenizer: Any, text: str) -> list[int]:
    """``text`` as a user turn through the tokenizer's chat template (plain ids without one).

    transformers 5 returns a ``BatchEncoding`` from ``apply_chat_template(tokenize=True)``, older
    versions a list: both (and tensors) come back as a flat list of ids.
    """
    if not getattr(tokenizer, "chat_template", None):
        return [int(t) for t in tokenizer(text, add_special_tokens=False)["input_ids"]]
    out = tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
    )
    if not isinstance(out, (list, tuple, torch.Tensor)):
        out = out["input_ids"]  # a BatchEncoding or a dict
    ids = out.tolist() if isinstance(out, torch.Tensor) else list(out)
    if ids and isinstance(ids[0], (list, tuple)):
        ids = list(ids[0])
    return [int(t) for t in ids]
