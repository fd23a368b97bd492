"""CARSSampler: exact samples from an LM restricted to a constraint's language.

Styles (the official code's learning levels):

* ``rs``   plain rejection sampling, stopping an attempt at its first invalid token;
* ``rsft`` rejection sampling with the first token drawn under the root's allowed mask;
* ``ars``  adaptive rejection sampling: every sampled invalid token is removed from the trie
  (θ set to 0 and propagated), so it is never proposed again;
* ``cars`` ARS plus, at every new node, the constraint's full allowed mask (the "cone") and a
  constrained root. A node created during the current attempt is sampled from the raw p_u: its
  parent's θ entry does not include the new cone yet, so drawing raw keeps the proposal consistent.

All styles are exact: accepted strings are distributed as ``P(w | w ∈ L)`` for the (tempered)
model with strings of at most ``max_new_tokens`` tokens. The acceptance probability of an
attempt is ``P(L) / Z_root``; ``Z_root`` only decreases, so acceptance only improves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import torch

from cars_sampling.constraints import Constraint, fingerprint_of
from cars_sampling.lm import NextTokenLM
from cars_sampling.tempering import check_logprobs, check_sampling_args, transform_logprobs
from cars_sampling.trie import Node, Trie, draw

Style = Literal["cars", "ars", "rsft", "rs"]
STYLES: tuple[str, ...] = ("cars", "ars", "rsft", "rs")


@dataclasses.dataclass
class CARSStats:
    """Counters of one (prompt, constraint) run, i.e. since the last reset of the trie.

    ``forward_passes`` counts next-token distributions consumed, i.e. the LM forward passes a
    plain ``generate`` loop would run (the paper's efficiency unit); ``lm_calls`` counts the LM
    evaluations actually made: one per new trie node with ``prefix_cache=True`` (revisited prefixes
    are read from the trie, for every style), one per consumed distribution with
    ``prefix_cache=False`` (the paper's regime, where every attempt runs the LM afresh).
    """

    attempts: int = 0
    accepted: int = 0
    forward_passes: int = 0
    lm_calls: int = 0
    mask_computations: int = 0
    acceptance_history: list[bool] = dataclasses.field(default_factory=list)
    z_root_history: list[float] = dataclasses.field(default_factory=list)
    trie_nodes: int = 0
    trie_bytes: int = 0


@dataclasses.dataclass
class SampleResult:
    """What one :meth:`CARSSampler.sample` call produced.

    ``token_ids`` exclude the final EOS; ``raw_logprobs`` are the unconstrained log-probabilities
    ``Σ log p`` of the sampled tokens (EOS included) under the tempered model. ``exhausted`` is
    ``True`` when fewer than ``n_samples`` were found; ``reason`` then says why.
    """

    token_ids: list[list[int]]
    texts: list[str]
    raw_logprobs: list[float]
    n_attempts: int
    n_forward_passes: int
    n_lm_calls: int
    exhausted: bool
    reason: str = ""
    acceptance_history: list[bool] = dataclasses.field(default_factory=list)

    @property
    def n_valid(self) -> int:
        return len(self.token_ids)


def prompt_ids(prompt: Any, tokenizer: Any = None) -> list[int]:
    """A prompt as a flat list of token ids; refuses batches (the algorithm samples one prompt)."""
    if isinstance(prompt, str):
        if tokenizer is None:
            raise TypeError("a str prompt needs a tokenizer; pass tokenizer= or token ids")
        return list(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    if isinstance(prompt, torch.Tensor):
        if prompt.dim() == 2 and prompt.shape[0] == 1:
            prompt = prompt[0]
        if prompt.dim() != 1:
            raise ValueError(
                f"batch size above one is not supported (prompt tensor of shape {tuple(prompt.shape)}); "
                "the trie is per prompt, so sample each prompt with its own call"
            )
        return [int(t) for t in prompt.tolist()]
    ids = list(prompt)
    # bool is an int subclass, but [True, 0] is a mask or a mistake, not token ids.
    if any(not isinstance(t, (int, np.integer)) or isinstance(t, (bool, np.bool_)) for t in ids):
        raise ValueError(
            "prompt must be a str or a flat sequence of token ids; batch size above one is not "
            f"supported (got elements of type {sorted({type(t).__name__ for t in ids})})"
        )
    return [int(t) for t in ids]


def check_positive_int(name: str, value: Any) -> None:
    """Raise ``ValueError`` unless ``value`` is an int >= 1 (a count or a length)."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")


def check_vocabularies(lm: Any, constraint: Constraint) -> None:
    """Raise ``ValueError`` when the LM's and the constraint's token ids do not line up."""
    if lm.vocab_size != constraint.vocab_size:
        raise ValueError(
            f"vocabulary mismatch: the LM gives {lm.vocab_size} logits but the constraint covers "
            f"{constraint.vocab_size} token ids; build the constraint with vocab_size={lm.vocab_size}"
        )


def checked_prompt_ids(prompt: Any, tokenizer: Any, vocab_size: int) -> list[int]:
    """:func:`prompt_ids`, refusing ids outside ``[0, vocab_size)`` (the LM would index past)."""
    ids = prompt_ids(prompt, tokenizer)
    bad = [t for t in ids if not 0 <= t < vocab_size]
    if bad:
        raise ValueError(
            f"prompt token ids {bad[:5]} are outside the LM's vocabulary [0, {vocab_size})"
        )
    return ids


def checked_run_args(
    lm: Any,
    constraint: Constraint,
    prompt: Any,
    tokenizer: Any,
    n_samples: Any,
    max_new_tokens: Any,
    max_attempts: Any = None,
) -> list[int]:
    """The checks every sampling entry point makes (``max_attempts=None``: a default bound);
    returns the prompt ids."""
    check_vocabularies(lm, constraint)
    for name, value in (("n_samples", n_samples), ("max_new_tokens", max_new_tokens)):
        check_positive_int(name, value)
    if max_attempts is not None:
        check_positive_int("max_attempts", max_attempts)
    return checked_prompt_ids(prompt, tokenizer, lm.vocab_size)


def _is_hf_model(obj: Any) -> bool:
    return hasattr(obj, "config") and callable(obj) and not hasattr(obj, "logprobs")


class CARSSampler:
    """Exact constrained sampler (CARS and its ablations) over a :class:`NextTokenLM`.

    The trie persists across :meth:`sample` calls for the same prompt and constraint, so later
    calls are cheaper; a different prompt or constraint (detected by fingerprint) starts a new trie.
    A Hugging Face ``PreTrainedModel`` is wrapped in
    :class:`~cars_sampling.transformers_lm.TransformersLM` (KV-cache reuse) automatically.
    """

    def __init__(
        self,
        lm: NextTokenLM | Any,
        constraint: Constraint,
        *,
        tokenizer: Any = None,
        style: Style = "cars",
        max_new_tokens: int = 512,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        allow_truncation: bool = False,
        seed: int | None = None,
        sparse_trie: bool = True,
        max_trie_bytes: int | None = None,
        prefix_cache: bool = True,
    ) -> None:
        if style not in STYLES:
            raise ValueError(f"style must be one of {STYLES}, got {style!r}")
        check_positive_int("max_new_tokens", max_new_tokens)
        check_sampling_args(temperature, top_k, top_p, allow_truncation)
        if max_trie_bytes is not None and max_trie_bytes <= 0:
            raise ValueError(f"max_trie_bytes must be None or > 0, got {max_trie_bytes!r}")
        if _is_hf_model(lm):
            from cars_sampling.transformers_lm import TransformersLM

            lm = TransformersLM(lm, tokenizer)
        if not isinstance(lm, NextTokenLM):
            raise TypeError(
                f"lm must follow NextTokenLM (vocab_size, logprobs(prefix_ids)) or be a transformers "
                f"model, got {type(lm).__name__}"
            )
        if not isinstance(constraint, Constraint):
            raise TypeError(
                "constraint must follow the Constraint protocol (reset, advance, allowed_mask, "
                f"is_accepting, vocab_size, eos_token_ids), got {type(constraint).__name__}"
            )
        check_vocabularies(lm, constraint)
        self.lm = lm
        self.constraint = constraint
        self.tokenizer = tokenizer
        self.style = style
        self.max_new_tokens = max_new_tokens
        self.temperature = float(temperature)
        self.top_k = top_k
        self.top_p = top_p
        self.sparse_trie = sparse_trie
        self.max_trie_bytes = max_trie_bytes
        self.prefix_cache = bool(prefix_cache)
        self._rng = np.random.default_rng(seed)
        self._key: tuple[Any, ...] | None = None
        self.reset()

    # -- state ---------------------------------------------------------------------------------
    def reset(self) -> None:
        """Drop the trie and the counters (a new prompt or constraint needs a new trie)."""
        self.trie = Trie(sparse=self.sparse_trie, max_bytes=self.max_trie_bytes)
        # One attempt adds at most one θ entry per level of its path plus the invalid token's.
        self.trie.reserve = self.trie.entry_bytes * (self.max_new_tokens + 2)
        self._stats = CARSStats()
        self._prompt: list[int] = []

    @property
    def stats(self) -> CARSStats:
        self._stats.trie_nodes = self.trie.n_nodes
        self._stats.trie_bytes = self.trie.nbytes
        return self._stats

    @property
    def z_root(self) -> float:
        """The proposal's normaliser: the model mass not yet known to be invalid (1 before learning)."""
        if self.trie.root is None or self.style == "rs":
            return 1.0
        return self.trie.z(self.trie.root)

    def _logp(self, tokens: Sequence[int]) -> torch.Tensor:
        lp = self.lm.logprobs([*self._prompt, *tokens])
        if lp.dim() != 1 or lp.numel() != self.constraint.vocab_size:
            raise ValueError(
                f"the LM returned log-probs of shape {tuple(lp.shape)}, expected "
                f"({self.constraint.vocab_size},)"
            )
        self._stats.lm_calls += 1
        check_logprobs(lp.detach(), tokens)  # before tempering: it would turn +inf into NaN
        lp = transform_logprobs(lp.detach().cpu(), self.temperature, self.top_k, self.top_p)
        check_logprobs(lp, tokens)
        return lp

    def _run_key(self, ids: list[int]) -> tuple[Any, ...]:
        """Everything the trie's numbers depend on: a change in any of them needs a new trie."""
        lm_fp = getattr(self.lm, "fingerprint", None)
        return (
            tuple(ids),
            fingerprint_of(self.constraint),
            id(self.lm) if lm_fp is None else lm_fp,
            self.temperature,
            self.top_k,
            self.top_p,
            self.style,
            self.max_new_tokens,
        )

    def _proposal(self, node: Node, fresh: bool, depth: int) -> np.ndarray:
        """The weights an attempt draws from at ``node`` (``depth`` tokens below the root).

        A node created in this attempt is drawn from the raw ``p_u``: its parent's θ entry does not
        include the cone just added, so applying it here would double-count (the classic bug).
        """
        if (self.style == "cars" and fresh) or self.style == "rs":
            return self.trie.weights_array(node, theta=False)
        if self.style == "rsft" and depth > 0:
            return self.trie.weights_array(node, theta=False)
        return self.trie.weights_array(node)

    def _cone(self, node: Node) -> None:
        self._stats.mask_computations += 1
        self.trie.apply_cone(node, self.constraint.allowed_mask())

    def _ensure_root(self) -> None:
        # The root's cone (cars, rsft) is part of the proposal of the very first attempt.
        if self.trie.root is None:
            root = self.trie.set_root(self._logp([]), born=self._stats.attempts)
            if self.style in ("cars", "rsft"):
                self.constraint.reset()
                self._cone(root)

    # -- one attempt ---------------------------------------------------------------------------
    def _attempt(self) -> tuple[str, list[int], float]:
        """One proposal: ("accept", tokens, logprob), ("reject", ...) or ("exhausted", ...)."""
        c, trie, style, k = self.constraint, self.trie, self.style, self._stats.attempts
        c.reset()
        assert trie.root is not None, "_ensure_root() runs before every attempt"
        learn = style in ("ars", "cars")
        nodes: list[Node] = [trie.root]
        tokens: list[int] = []
        logprob = 0.0
        pending = False  # new cones were added: propagate even if the attempt is accepted
        trie.check_room(0)
        new_attempt = getattr(self.lm, "new_attempt", None)
        if not self.prefix_cache and callable(new_attempt):
            new_attempt()  # e.g. TransformersLM drops its KV slices: a fresh generate per attempt
        while True:
            node = nodes[-1]
            created = node.born == k  # its distribution was computed in this attempt
            fresh = created and len(nodes) > 1
            if not self.prefix_cache and not created:
                self._logp(tokens)  # the paper's regime: the LM runs at every step of every attempt
            if style == "cars" and fresh:
                self._cone(node)
                pending = True
            tok = draw(self._proposal(node, fresh, len(nodes) - 1), float(self._rng.random()))
            if tok < 0:
                if len(nodes) == 1:
                    return "exhausted", [], 0.0
                # Only reachable by float underflow: a positive parent entry over an empty subtree.
                trie.set_theta(nodes[-2], tokens[-1], 0.0)
                trie.propagate(nodes[:-1], tokens[:-1])
                return "reject", [], 0.0
            self._stats.forward_passes += 1
            logprob += float(node.lp[tok]) - node.lse
            if not c.advance(tok):
                if learn:
                    trie.set_theta(node, tok, 0.0)
                    trie.propagate(nodes, tokens)
                return "reject", [], 0.0
            if tok in c.eos_token_ids:
                if pending:
                    trie.propagate(nodes, tokens)
                return "accept", tokens, logprob
            tokens.append(tok)
            if len(tokens) == self.max_new_tokens:
                if c.is_accepting():
                    if pending:
                        trie.propagate(nodes, tokens[:-1])
                    return "accept", tokens, logprob
                if learn:  # a truncated non-member: its last token is invalid here
                    trie.set_theta(node, tok, 0.0)
                    trie.propagate(nodes, tokens[:-1])
                return "reject", [], 0.0
            child = node.children.get(tok)
            if child is None:
                child = trie.add_child(node, tok, self._logp(tokens), born=k)
            nodes.append(child)

    # -- public --------------------------------------------------------------------------------
    def sample(
        self,
        prompt: str | Sequence[int] | torch.Tensor = (),
        n_samples: int = 1,
        max_attempts: int = 2000,
    ) -> SampleResult:
        """Draw up to ``n_samples`` exact constrained samples within ``max_attempts`` attempts."""
        check_positive_int("max_attempts", max_attempts)  # no default bound here
        ids = checked_run_args(
            self.lm, self.constraint, prompt, self.tokenizer, n_samples, self.max_new_tokens
        )
        key = self._run_key(ids)
        if (
            key != self._key
        ):  # a new prompt, grammar, LM or temperature: the old trie would be wrong
            self.reset()
            self._key = key
            self._prompt = ids
        stats = self._stats
        start = (stats.attempts, stats.forward_passes, stats.lm_calls)
        out_ids: list[list[int]] = []
        logprobs: list[float] = []
        history: list[bool] = []
        reason = ""
        while len(out_ids) < n_samples:
            if len(history) == max_attempts:
                reason = (
                    f"max_attempts={max_attempts} reached with {len(out_ids)}/{n_samples} "
                    f"valid samples (Z_root={self.z_root:.3g})"
                )
                break
            self._ensure_root()
            stats.z_root_history.append(self.z_root)
            status, tokens, lp = self._attempt()
            if status == "exhausted":
                stats.z_root_history.pop()
                reason = (
                    "the language is exhausted: every string of at most max_new_tokens="
                    f"{self.max_new_tokens} tokens is known to be invalid (Z_root = 0); the "
                    "constraint admits no string, or max_new_tokens is too small for any valid one"
                )
                break
            stats.attempts += 1
            accepted = status == "accept"
            stats.acceptance_history.append(accepted)
            history.append(accepted)
            if accepted:
                stats.accepted += 1
                out_ids.append(tokens)
                logprobs.append(lp)
        return SampleResult(
            token_ids=out_ids,
            texts=[self._decode(t) for t in out_ids],
            raw_logprobs=logprobs,
            n_attempts=stats.attempts - start[0],
            n_forward_passes=stats.forward_passes - start[1],
            n_lm_calls=stats.lm_calls - start[2],
            exhausted=len(out_ids) < n_samples,
            reason=reason,
            acceptance_history=history,
        )

    def _decode(self, tokens: list[int]) -> str:
        if self.tokenizer is not None:
            return str(self.tokenizer.decode(tokens))
        decode = getattr(self.constraint, "decode", None)
        return decode(tokens) if callable(decode) else " ".join(map(str, tokens))
