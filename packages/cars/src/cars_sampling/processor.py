"""CARS inside ``model.generate``: a logits processor that keeps the trie across ``generate`` calls.

Each ``generate`` call is one attempt. The processor turns the model's scores at prefix u into
``log(p_u ⊙ θ_u)`` (or the raw ``log p_u`` at a node created in this attempt, as in
:class:`~cars_sampling.CARSSampler`). When the token ``generate`` sampled turns out invalid, the
processor learns from it and forces EOS, so ``generate`` ends cleanly instead of raising; call
:meth:`CARSLogitsProcessor.finish` on the output to learn whether the attempt was valid.

``generate`` must sample from the processed scores unchanged: pass ``do_sample=True``,
``temperature=1.0``, ``top_k=0``, ``top_p=1.0`` (see :func:`generate_kwargs`) and give the
processor the temperature you want. Batch size must be 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from cars_sampling.constraints import Constraint
from cars_sampling.sampler import STYLES, Style
from cars_sampling.tempering import check_sampling_args, transform_logprobs
from cars_sampling.trie import Node, Trie


def generate_kwargs(max_new_tokens: int, eos_token_ids: Sequence[int]) -> dict[str, Any]:
    """``generate`` arguments that sample exactly from the processed scores."""
    eos = sorted(eos_token_ids)
    return {
        "do_sample": True,
        "temperature": 1.0,
        "top_k": 0,
        "top_p": 1.0,
        "max_new_tokens": max_new_tokens,
        "eos_token_id": eos,
        "pad_token_id": eos[0],
    }


class CARSLogitsProcessor:
    """A ``transformers`` logits processor running CARS (or ARS/RSFT/RS) across ``generate`` calls."""

    def __init__(
        self,
        constraint: Constraint,
        *,
        style: Style = "cars",
        temperature: float = 1.0,
        sparse_trie: bool = True,
        max_trie_bytes: int | None = None,
    ) -> None:
        if style not in STYLES:
            raise ValueError(f"style must be one of {STYLES}, got {style!r}")
        check_sampling_args(temperature, None, None, False)
        self.constraint = constraint
        self.style = style
        self.temperature = float(temperature)
        self.trie = Trie(sparse=sparse_trie, max_bytes=max_trie_bytes)
        self.attempts = 0
        self.accepted = 0
        self._prompt_len: int | None = None

    def begin(self, prompt_length: int) -> None:
        """Start an attempt for a prompt of ``prompt_length`` tokens (call before each ``generate``)."""
        self._prompt_len = int(prompt_length)
        self._nodes: list[Node] = []
        self._tokens: list[int] = []
        self._failed = False
        self._pending = False
        self.constraint.reset()

    @property
    def attempt_failed(self) -> bool:
        """Whether the current attempt already sampled an invalid token (EOS is being forced)."""
        return self._failed

    def _logp(self, scores: torch.Tensor) -> torch.Tensor:
        logp = torch.log_softmax(scores[0].detach().float().cpu(), -1)
        return transform_logprobs(logp, self.temperature)

    def _learn_invalid(self, node: Node, token: int) -> None:
        self._failed = True
        if self.style in ("ars", "cars"):
            self.trie.set_theta(node, token, 0.0)
            self.trie.propagate(self._nodes, self._tokens)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self._prompt_len is None:
            raise RuntimeError("call begin(prompt_length) before every generate()")
        if input_ids.shape[0] != 1:
            raise ValueError(f"batch size above one is not supported (got {input_ids.shape[0]})")
        if scores.shape[-1] != self.constraint.vocab_size:
            raise ValueError(
                f"vocabulary mismatch: scores have {scores.shape[-1]} entries, the constraint "
                f"covers {self.constraint.vocab_size} token ids"
            )
        generated = input_ids[0, self._prompt_len :].tolist()
        if not self._nodes:
            root = self.trie.root
            if root is None:
                root = self.trie.set_root(self._logp(scores), born=self.attempts)
                if self.style in ("cars", "rsft"):
                    self.trie.apply_cone(root, self.constraint.allowed_mask())
            self._nodes.append(root)
        elif not self._failed:
            node, tok = self._nodes[-1], generated[-1]
            if not self.constraint.advance(tok):
                self._learn_invalid(node, tok)
            else:
                self._tokens.append(tok)
                child = node.children.get(tok)
                if child is None:
                    child = self.trie.add_child(node, tok, self._logp(scores), born=self.attempts)
                self._nodes.append(child)
        if self._failed:  # end generate() cleanly: only EOS remains
            forced = torch.full_like(scores, -torch.inf)
            forced[:, sorted(self.constraint.eos_token_ids)[0]] = 0.0
            return forced
        node = self._nodes[-1]
        fresh = node.born == self.attempts and len(self._nodes) > 1
        if self.style == "cars" and fresh:
            self.trie.apply_cone(node, self.constraint.allowed_mask())
            self._pending = True
            weights = self.trie.weights(node, theta=False)
        elif self.style == "rs" or (self.style == "rsft" and len(self._nodes) > 1):
            weights = self.trie.weights(node, theta=False)
        else:
            weights = self.trie.weights(node)
        out = torch.log(weights).to(scores.dtype).to(scores.device)
        return out.unsqueeze(0)

    def finish(self, sequence: torch.Tensor | Sequence[int]) -> bool:
        """Close the attempt that produced ``sequence`` (prompt included); ``True`` if it is valid."""
        if self._prompt_len is None:
            raise RuntimeError("finish() without begin()")
        ids = sequence.tolist() if isinstance(sequence, torch.Tensor) else list(sequence)
        if ids and isinstance(ids[0], list):
            if len(ids) != 1:
                raise ValueError(f"batch size above one is not supported (got {len(ids)})")
            ids = ids[0]
        generated = ids[self._prompt_len :]
        self.attempts += 1
        ok = False
        if not self._failed and generated and len(generated) == len(self._tokens) + 1:
            node, tok = self._nodes[-1], generated[-1]
            if not self.constraint.advance(tok):
                self._learn_invalid(node, tok)
            elif tok in self.constraint.eos_token_ids or self.constraint.is_accepting():
                ok = True
            else:  # cut by max_new_tokens outside the language
                self._learn_invalid(node, tok)
        if ok:
            self.accepted += 1
            if self._pending:
                self.trie.propagate(self._nodes, self._tokens)
        self._prompt_len = None
        return ok
