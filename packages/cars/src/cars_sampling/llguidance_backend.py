"""Grammars through ``llguidance`` (Lark/EBNF, regex, JSON schema): the official code's checker.

``llguidance`` is an optional dependency (``pip install 'cars-sampling[llguidance]'``), imported
when a constraint is built. Its matcher stays in an error state once it consumes an invalid token,
so :meth:`LLGuidanceConstraint.advance` checks a token against the mask before consuming it. The
mask allows only the canonical tokenization of text the grammar forces, so the token language is a
subset of "every tokenization of a valid string"; all styles target that same language.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from cars_sampling.constraints import special_ids
from cars_sampling.errors import GrammarError

# llguidance's JSON compile options besides separators and whitespace (its ``x-guidance`` keys).
JSON_OPTIONS = frozenset(
    {
        "item_separator",
        "key_separator",
        "whitespace_flexible",
        "whitespace_pattern",
        "coerce_one_of",
        "lenient",
    }
)


def default_stop_tokens(tokenizer: Any, model: Any = None) -> list[int]:
    """The tokenizer's EOS and every ``eos_token_id`` of the generation config.

    The generation config comes from ``model`` when given, else from ``generation_config.json``
    in the tokenizer's local folder (chat models stop on several ids, e.g. ``<|eot_id|>``).
    """
    ids: set[int] = set()
    config = getattr(model, "generation_config", None) if model is not None else None
    folder = getattr(tokenizer, "name_or_path", "") or ""
    if config is None and os.path.isfile(os.path.join(folder, "generation_config.json")):
        from transformers import GenerationConfig

        config = GenerationConfig.from_pretrained(folder)
    for value in (getattr(tokenizer, "eos_token_id", None), getattr(config, "eos_token_id", None)):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    if not ids:
        raise ValueError(
            "the tokenizer has no eos_token_id and no generation config names one; pass eos_token_ids"
        )
    return sorted(ids)


# Prepended to a hidden special token's text in the tokenizer llguidance sees: no grammar text
# can spell it, so a literal "<|pad|>" is matched by text tokens, as the DFA and XGrammar do.
_HIDDEN = "\u0000"


def _guarded_lltokenizer(llg: Any, tokenizer: Any, eos: list[int], hidden: set[int]) -> Any:
    """llguidance's tokenizer (as ``llguidance.hf.from_tokenizer`` builds it) with the special
    tokens in ``hidden`` renamed, so that its forced-text tokenization never produces them."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ValueError("LLGuidanceConstraint needs a fast (Rust) Hugging Face tokenizer")
    backend = copy.copy(backend)
    backend.no_padding()
    backend.no_truncation()
    spec = json.loads(backend.to_str())
    vocab = spec.get("model", {}).get("vocab")
    for added in spec.get("added_tokens", []):
        token_id, text = added.get("id"), added["content"]
        if token_id not in hidden:
            continue
        added["content"] = _HIDDEN + text
        # The model's own vocabulary may list the token too (BPE: a dict, Unigram: a list).
        if isinstance(vocab, dict) and vocab.get(text) == token_id:
            vocab[_HIDDEN + text] = vocab.pop(text)
        elif isinstance(vocab, list) and token_id < len(vocab) and vocab[token_id][0] == text:
            vocab[token_id][0] = _HIDDEN + text
    return llg.LLTokenizer(json.dumps(spec), eos_token=eos)


def _llguidance() -> Any:
    try:
        import llguidance
    except ImportError as exc:
        raise ImportError(
            "LLGuidanceConstraint needs llguidance: pip install 'cars-sampling[llguidance]'"
        ) from exc
    return llguidance


class LLGuidanceConstraint:
    """A Lark/EBNF grammar (llguidance's dialect) over a Hugging Face fast tokenizer.

    ``eos_token_ids`` is the full set of stop tokens (default: :func:`default_stop_tokens`, the
    tokenizer's EOS plus every ``eos_token_id`` of the model's generation config, from ``model=``
    or the tokenizer's local folder); each is allowed exactly when the grammar accepts. Special
    tokens (``all_special_ids`` and added special tokens, stop tokens aside) are removed from
    every mask unless ``allow_special_tokens=True``, whatever the grammar says (``<[*]>``,
    ``<[0-511]>``): a user-supplied grammar cannot emit control tokens, and naming one
    (``<|pad|>``) is a :class:`~cars_sampling.GrammarError` at construction. A string literal
    that spells one (``"say <|pad|> please"``) is text: it is sampled as text tokens, as
    :class:`~cars_sampling.DFAConstraint` and the XGrammar backend do (llguidance alone would turn
    it into the special token). Where the guard leaves a prefix no continuation (``<[0]>`` for
    the pad id), ``GrammarError`` says so. ``vocab_size`` pads the mask for models with extra
    rows.
    """

    def __init__(
        self,
        grammar: str,
        tokenizer: Any,
        *,
        eos_token_ids: int | Sequence[int] | None = None,
        vocab_size: int | None = None,
        allow_special_tokens: bool = False,
        model: Any = None,
    ) -> None:
        llg = _llguidance()
        if not isinstance(grammar, str):
            raise TypeError(f"grammar must be a str, got {type(grammar).__name__}")
        if eos_token_ids is None:
            eos_token_ids = default_stop_tokens(tokenizer, model)
        eos = [eos_token_ids] if isinstance(eos_token_ids, int) else list(eos_token_ids)
        self.vocab_size = int(vocab_size if vocab_size is not None else len(tokenizer))
        if not eos or any(not 0 <= t < self.vocab_size for t in eos):
            raise ValueError(f"eos_token_ids {eos} must be non-empty ids in [0, {self.vocab_size})")
        self.eos_token_ids = frozenset(eos)
        self.allow_special_tokens = allow_special_tokens
        self.special_token_ids = frozenset(special_ids(tokenizer)) - self.eos_token_ids
        self._banned = np.array(
            sorted(t for t in self.special_token_ids if t < self.vocab_size), dtype=np.int64
        )
        self._special_names = {
            t: str(tokenizer.convert_ids_to_tokens(t)) for t in self._banned.tolist()
        }
        hidden = set() if allow_special_tokens else set(self._banned.tolist())
        self._lltok = _guarded_lltokenizer(llg, tokenizer, eos, hidden)
        if self._lltok.vocab_size > self.vocab_size:
            raise ValueError(
                f"vocabulary mismatch: the tokenizer has {self._lltok.vocab_size} tokens, "
                f"vocab_size={self.vocab_size}"
            )
        is_error, messages = llg.LLMatcher.validate_grammar_with_warnings(grammar, self._lltok)
        if is_error:
            message = messages[0] if messages else "?"
            if "unknown special token" in message and not allow_special_tokens:
                message = (  # llguidance's list of available ones would show the hidden names
                    message.split("; following special tokens")[0] + ": the special-token guard "
                    "hides special tokens from grammars, which cannot emit them; pass "
                    "allow_special_tokens=True to name one"
                )
            raise GrammarError(f"grammar does not compile: {message}")
        self._initial = llg.LLMatcher(self._lltok, grammar, log_level=0)
        if self._initial.is_error():
            raise GrammarError(f"grammar does not compile: {self._initial.get_error()}")
        self.grammar = grammar
        self.fingerprint = (
            "llg:"
            + hashlib.sha256(
                repr((grammar, sorted(eos), self._lltok.vocab_size, allow_special_tokens)).encode()
            ).hexdigest()[:16]
        )
        self.reset()
        self._mask()  # a grammar that can only start with a banned special token fails here

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
        cls,
        schema: dict[str, Any] | str,
        tokenizer: Any,
        *,
        separators: tuple[str, str] = (", ", ": "),
        whitespace_flexible: bool = False,
        whitespace_pattern: str | None = None,
        json_options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> LLGuidanceConstraint:
        """JSON documents valid under ``schema``, laid out as ``json.dumps`` does by default.

        ``separators`` = (item, key) separators (``(",", ":")`` for compact JSON);
        ``whitespace_flexible=True`` allows any JSON whitespace around them instead (the language
        then has more strings); ``whitespace_pattern`` is llguidance's regex for that whitespace.
        ``json_options`` passes further llguidance ``x-guidance`` options (``coerce_one_of``,
        ``lenient``) through.
        """
        text = schema if isinstance(schema, str) else json.dumps(schema)
        if len(separators) != 2 or not all(isinstance(x, str) for x in separators):
            raise ValueError(f"separators must be (item, key) strings, got {separators!r}")
        options: dict[str, Any] = {
            "item_separator": separators[0],
            "key_separator": separators[1],
            "whitespace_flexible": bool(whitespace_flexible),
        }
        if whitespace_pattern is not None:
            options["whitespace_pattern"] = whitespace_pattern
        extra = dict(json_options or {})
        unknown = set(extra) - JSON_OPTIONS
        if unknown:  # llguidance ignores unknown keys silently
            raise ValueError(
                f"unknown JSON options {sorted(unknown)}; llguidance knows {sorted(JSON_OPTIONS)}"
            )
        options.update(extra)
        try:
            grammar = _llguidance().LLMatcher.grammar_from_json_schema(text, defaults=options)
        except ValueError as exc:
            raise GrammarError(f"invalid JSON schema: {exc}") from exc
        return cls(grammar, tokenizer, **kwargs)

    def fork(self) -> LLGuidanceConstraint:
        """An independent state machine over the same compiled grammar (one per batch row)."""
        other = copy.copy(self)
        other.reset()
        return other

    # -- protocol ------------------------------------------------------------------------------
    def reset(self) -> None:
        self._m = self._initial.deep_copy()
        self._consumed: list[int] = []
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
        self._consumed.append(int(token_id))
        return True

    def _mask(self) -> np.ndarray:
        bits = np.frombuffer(self._m.compute_bitmask(), dtype=np.uint8)
        mask = np.unpackbits(bits, bitorder="little")[: self._lltok.vocab_size].astype(bool)
        if not self.allow_special_tokens:  # checked on the compiled mask: no grammar escapes it
            banned = self._banned[self._banned < mask.size]
            forced = banned[mask[banned]]
            mask[banned] = False
            if forced.size and not mask.any() and not self._m.is_accepting():
                self._refuse_forced_special(forced)
        return mask

    def _refuse_forced_special(self, forced: np.ndarray) -> None:
        """The grammar can only continue with special tokens the guard removes: say so."""
        names = [self._special_names.get(int(t), "?") for t in forced[:5]]
        raise GrammarError(
            f"the grammar can only continue with special token(s) {forced[:5].tolist()} {names} "
            f"here (after {self._consumed[:20]} of the generated tokens), and the special-token "
            "guard removes them, so no string through this point can be sampled; remove them "
            "from the grammar or pass allow_special_tokens=True"
        )

    def is_accepting(self) -> bool:
        return not self._dead and not self._finished and self._m.is_accepting()

    def allowed_mask(self) -> torch.Tensor:
        mask = torch.zeros(self.vocab_size, dtype=torch.bool)
        if self._dead or self._finished:
            return mask
        mask[: self._lltok.vocab_size] = torch.from_numpy(self._mask())
        mask[sorted(self.eos_token_ids)] = self._m.is_accepting()
        return mask
