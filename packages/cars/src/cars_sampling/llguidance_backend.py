"""Grammars through ``llguidance`` (Lark/EBNF, regex, JSON schema): the official code's checker.

``llguidance`` is an optional dependency (``pip install 'cars-sampling[llguidance]'``), imported
when a constraint is built. Its matcher stays in an error state once it consumes an invalid token,
so :meth:`LLGuidanceConstraint.advance` checks a token against the mask before consuming it. The
mask allows only the canonical tokenization of text the grammar forces, so the token language is a
subset of "every tokenization of a valid string"; all styles target that same language.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from cars_sampling.errors import GrammarError


def _llguidance() -> Any:
    try:
        import llguidance
        import llguidance.hf
    except ImportError as exc:
        raise ImportError(
            "LLGuidanceConstraint needs llguidance: pip install 'cars-sampling[llguidance]'"
        ) from exc
    return llguidance


class LLGuidanceConstraint:
    """A Lark/EBNF grammar (llguidance's dialect) over a Hugging Face fast tokenizer.

    ``eos_token_ids`` is the full set of stop tokens (default: the tokenizer's EOS); each is
    allowed exactly when the grammar accepts. Special tokens inside the grammar (``<|eos|>``,
    ``<[123]>``) are refused unless ``allow_special_tokens=True``: a user-supplied grammar must
    not be able to emit control tokens. ``vocab_size`` pads the mask for models with extra rows.
    """

    def __init__(
        self,
        grammar: str,
        tokenizer: Any,
        *,
        eos_token_ids: int | Sequence[int] | None = None,
        vocab_size: int | None = None,
        allow_special_tokens: bool = False,
    ) -> None:
        llg = _llguidance()
        if not isinstance(grammar, str):
            raise TypeError(f"grammar must be a str, got {type(grammar).__name__}")
        if not allow_special_tokens:
            specials = [
                t for t in getattr(tokenizer, "all_special_tokens", []) if t and t in grammar
            ]
            if specials or re.search(r"<\[\s*\d", grammar):
                raise GrammarError(
                    f"the grammar names special tokens {specials or ['<[id]>']}; pass "
                    "allow_special_tokens=True if the grammar may really emit control tokens"
                )
        if eos_token_ids is None:
            eos_token_ids = tokenizer.eos_token_id
        if eos_token_ids is None:
            raise ValueError("the tokenizer has no eos_token_id; pass eos_token_ids")
        eos = [eos_token_ids] if isinstance(eos_token_ids, int) else list(eos_token_ids)
        self.vocab_size = int(vocab_size if vocab_size is not None else len(tokenizer))
        if not eos or any(not 0 <= t < self.vocab_size for t in eos):
            raise ValueError(f"eos_token_ids {eos} must be non-empty ids in [0, {self.vocab_size})")
        self.eos_token_ids = frozenset(eos)
        self._lltok = llg.hf.from_tokenizer(tokenizer, eos_token=eos)
        if self._lltok.vocab_size > self.vocab_size:
            raise ValueError(
                f"vocabulary mismatch: the tokenizer has {self._lltok.vocab_size} tokens, "
                f"vocab_size={self.vocab_size}"
            )
        is_error, messages = llg.LLMatcher.validate_grammar_with_warnings(grammar, self._lltok)
        if is_error:
            raise GrammarError(f"grammar does not compile: {messages[0] if messages else '?'}")
        self._initial = llg.LLMatcher(self._lltok, grammar, log_level=0)
        if self._initial.is_error():
            raise GrammarError(f"grammar does not compile: {self._initial.get_error()}")
        self.grammar = grammar
        self.fingerprint = (
            "llg:"
            + hashlib.sha256(
                repr((grammar, sorted(eos), self._lltok.vocab_size)).encode()
            ).hexdigest()[:16]
        )
        self.reset()

    @classmethod
    def from_grammar(cls, grammar: str, tokenizer: Any, **kwargs: Any) -> LLGuidanceConstraint:
        """A Lark/EBNF grammar (``start: ...``), as llguidance reads it."""
        return cls(grammar, tokenizer, **kwargs)

    @classmethod
    def from_regex(cls, pattern: str, tokenizer: Any, **kwargs: Any) -> LLGuidanceConstraint:
        """A full-match regular expression."""
        return cls(_llguidance().LLMatcher.grammar_from_regex(pattern), tokenizer, **kwargs)

    @classmethod
    def from_json_schema(
        cls, schema: dict[str, Any] | str, tokenizer: Any, **kwargs: Any
    ) -> LLGuidanceConstraint:
        """JSON documents valid under ``schema`` (compact separators, no free whitespace)."""
        text = schema if isinstance(schema, str) else json.dumps(schema)
        try:
            grammar = _llguidance().LLMatcher.grammar_from_json_schema(
                text, defaults={"whitespace_flexible": False}
            )
        except ValueError as exc:
            raise GrammarError(f"invalid JSON schema: {exc}") from exc
        return cls(grammar, tokenizer, **kwargs)

    # -- protocol ------------------------------------------------------------------------------
    def reset(self) -> None:
        self._m = self._initial.deep_copy()
        self._dead = False
        self._finished = False

    def advance(self, token_id: int) -> bool:
        if self._dead or self._finished:
            self._dead = True
            return False
        if token_id in self.eos_token_ids:
            self._finished = True
            self._dead = not self._m.is_accepting()
            return not self._dead
        # The mask, not validate_tokens, defines the language: llguidance's masks allow only the
        # canonical tokenization of forced text while validate_tokens accepts any, and every style
        # must target the same language.
        if not 0 <= token_id < self._lltok.vocab_size or not self._mask()[token_id]:
            self._dead = True
            return False
        self._m.consume_token(token_id)
        return True

    def _mask(self) -> np.ndarray:
        bits = np.frombuffer(self._m.compute_bitmask(), dtype=np.uint8)
        return np.unpackbits(bits, bitorder="little")[: self._lltok.vocab_size].astype(bool)

    def is_accepting(self) -> bool:
        return not self._dead and not self._finished and self._m.is_accepting()

    def allowed_mask(self) -> torch.Tensor:
        mask = torch.zeros(self.vocab_size, dtype=torch.bool)
        if self._dead or self._finished:
            return mask
        mask[: self._lltok.vocab_size] = torch.from_numpy(self._mask())
        mask[sorted(self.eos_token_ids)] = self._m.is_accepting()
        return mask
