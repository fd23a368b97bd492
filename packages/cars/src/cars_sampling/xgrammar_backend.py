"""Grammars through ``xgrammar`` (EBNF, regex, JSON schema): the spec's optional backend.

``xgrammar`` is an optional dependency (``pip install 'cars-sampling[xgrammar]'``), imported when
a constraint is built. Its matcher refuses an invalid token without changing state, and its masks
allow every tokenization of a valid text (as :class:`~cars_sampling.DFAConstraint` does, unlike
llguidance's canonical-only masks for forced text). Stop tokens and the special-token guard follow
:class:`~cars_sampling.llguidance_backend.LLGuidanceConstraint`: the stop-token set defaults to the
tokenizer's EOS plus the generation config's, and special ids are removed from every mask.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Sequence
from typing import Any

import torch

from cars_sampling.constraints import special_ids
from cars_sampling.errors import GrammarError
from cars_sampling.llguidance_backend import default_stop_tokens


def _xgrammar() -> Any:
    try:
        import xgrammar
    except ImportError as exc:
        raise ImportError(
            "XGrammarConstraint needs xgrammar: pip install 'cars-sampling[xgrammar]'"
        ) from exc
    return xgrammar


class XGrammarConstraint:
    """An EBNF grammar (xgrammar's GBNF dialect, ``root ::= ...``) over a Hugging Face tokenizer.

    ``eos_token_ids``, ``vocab_size``, ``allow_special_tokens`` and ``model`` mean what they mean
    for :class:`~cars_sampling.llguidance_backend.LLGuidanceConstraint`. Build from a compiled
    grammar with :meth:`from_grammar`, :meth:`from_regex` or :meth:`from_json_schema`.
    """

    def __init__(
        self,
        compiled: Any,
        tokenizer: Any,
        *,
        source: str,
        eos_token_ids: Sequence[int],
        vocab_size: int,
        allow_special_tokens: bool = False,
    ) -> None:
        xgr = _xgrammar()
        self.vocab_size = vocab_size
        self.eos_token_ids = frozenset(eos_token_ids)
        self.allow_special_tokens = allow_special_tokens
        banned = frozenset(special_ids(tokenizer)) - self.eos_token_ids
        self.special_token_ids = banned
        self._banned = sorted(t for t in banned if t < vocab_size)
        self._compiled = compiled
        self._n_bits = compiled.tokenizer_info.vocab_size
        self._bitmask = xgr.allocate_token_bitmask(1, self._n_bits)
        self._shifts = torch.arange(32, dtype=torch.int32)
        self.fingerprint = (
            "xgr:"
            + hashlib.sha256(
                repr(
                    (source, sorted(self.eos_token_ids), vocab_size, allow_special_tokens)
                ).encode()
            ).hexdigest()[:16]
        )
        self.reset()

    @staticmethod
    def _compiler(
        tokenizer: Any,
        eos_token_ids: int | Sequence[int] | None,
        vocab_size: int | None,
        model: Any,
    ) -> tuple[Any, list[int], int]:
        xgr = _xgrammar()
        if eos_token_ids is None:
            eos_token_ids = default_stop_tokens(tokenizer, model)
        eos = [eos_token_ids] if isinstance(eos_token_ids, int) else [int(t) for t in eos_token_ids]
        size = int(vocab_size if vocab_size is not None else len(tokenizer))
        if size < len(tokenizer):
            raise ValueError(
                f"vocabulary mismatch: the tokenizer has {len(tokenizer)} tokens, vocab_size={size}"
            )
        if not eos or any(not 0 <= t < size for t in eos):
            raise ValueError(f"eos_token_ids {eos} must be non-empty ids in [0, {size})")
        info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=size, stop_token_ids=eos)
        return xgr.GrammarCompiler(info, max_threads=1), eos, size

    @classmethod
    def _build(
        cls, kind: str, source: str, tokenizer: Any, compile_args: dict[str, Any], **kwargs: Any
    ) -> XGrammarConstraint:
        allow = bool(kwargs.pop("allow_special_tokens", False))
        compiler, eos, size = cls._compiler(
            tokenizer,
            kwargs.pop("eos_token_ids", None),
            kwargs.pop("vocab_size", None),
            kwargs.pop("model", None),
        )
        if kwargs:
            raise TypeError(f"unexpected arguments {sorted(kwargs)}")
        try:
            compiled = getattr(compiler, f"compile_{kind}")(source, **compile_args)
        except (RuntimeError, ValueError) as exc:  # xgrammar raises RuntimeError on parse errors
            raise GrammarError(f"{kind} does not compile: {exc}") from exc
        return cls(
            compiled,
            tokenizer,
            source=f"{kind}:{source}:{compile_args}",
            eos_token_ids=eos,
            vocab_size=size,
            allow_special_tokens=allow,
        )

    @classmethod
    def from_grammar(cls, grammar: str, tokenizer: Any, **kwargs: Any) -> XGrammarConstraint:
        """An EBNF grammar with a ``root`` rule, as xgrammar reads it."""
        if not isinstance(grammar, str):
            raise TypeError(f"grammar must be a str, got {type(grammar).__name__}")
        return cls._build("grammar", grammar, tokenizer, {}, **kwargs)

    @classmethod
    def from_regex(cls, pattern: str, tokenizer: Any, **kwargs: Any) -> XGrammarConstraint:
        """A full-match regular expression."""
        return cls._build("regex", pattern, tokenizer, {}, **kwargs)

    @classmethod
    def from_json_schema(
        cls,
        schema: dict[str, Any] | str,
        tokenizer: Any,
        *,
        separators: tuple[str, str] = (", ", ": "),
        any_whitespace: bool = False,
        **kwargs: Any,
    ) -> XGrammarConstraint:
        """JSON documents valid under ``schema``, laid out as ``json.dumps`` does by default
        (``separators=(",", ":")`` for compact JSON; ``any_whitespace=True``: xgrammar's flexible
        whitespace)."""
        text = schema if isinstance(schema, str) else json.dumps(schema)
        if len(separators) != 2 or not all(isinstance(x, str) for x in separators):
            raise ValueError(f"separators must be (item, key) strings, got {separators!r}")
        args = {"any_whitespace": bool(any_whitespace), "separators": tuple(separators)}
        return cls._build("json_schema", text, tokenizer, args, **kwargs)

    def fork(self) -> XGrammarConstraint:
        """An independent matcher over the same compiled grammar (one per batch row)."""
        other = copy.copy(self)
        other._bitmask = _xgrammar().allocate_token_bitmask(1, self._n_bits)
        other.reset()
        return other

    # -- protocol ------------------------------------------------------------------------------
    def reset(self) -> None:
        self._m = _xgrammar().GrammarMatcher(self._compiled)
        self._dead = False
        self._finished = False

    def _grammar_mask(self) -> torch.Tensor:
        """xgrammar's bitmask of grammar tokens (stop tokens off), special ids removed."""
        self._m.fill_next_token_bitmask(self._bitmask)
        words = self._bitmask[0].unsqueeze(1)
        bits = ((words >> self._shifts) & 1).bool().flatten()[: self._n_bits]
        mask = torch.zeros(self.vocab_size, dtype=torch.bool)
        mask[: self._n_bits] = bits
        mask[sorted(self.eos_token_ids)] = False
        if not self.allow_special_tokens:
            mask[self._banned] = False
        return mask

    def advance(self, token_id: int) -> bool:
        if self._dead or self._finished:
            self._dead = True
            return False
        if token_id in self.eos_token_ids:
            self._finished = True
            self._dead = not self._m.is_completed()
            return not self._dead
        if not 0 <= token_id < self.vocab_size or not self._grammar_mask()[token_id]:
            self._dead = True
            return False
        self._dead = not self._m.accept_token(int(token_id))
        return not self._dead

    def is_accepting(self) -> bool:
        return not self._dead and not self._finished and self._m.is_completed()

    def allowed_mask(self) -> torch.Tensor:
        if self._dead or self._finished:
            return torch.zeros(self.vocab_size, dtype=torch.bool)
        mask = self._grammar_mask()
        mask[sorted(self.eos_token_ids)] = self._m.is_completed()
        return mask
