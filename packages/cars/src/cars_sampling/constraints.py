"""Constraints: incremental checkers that say whether a token prefix can still become a valid string.

A :class:`Constraint` is a small state machine over token ids. The sampler calls ``reset()`` at the
start of every attempt, ``advance(token)`` after each sampled token (``False`` means the prefix is now
invalid), ``allowed_mask()`` at new trie nodes (CARS' "cones") and ``is_accepting()`` when a string ends.
End-of-sequence tokens are part of the vocabulary: they are allowed exactly in accepting states.

Backends here are pure Python: :class:`DFAConstraint` (a token- or character-level automaton, e.g.
from a regular expression) and :class:`PrefixPredicateConstraint` (any semantic check on prefixes,
optionally on top of another constraint). Lark/EBNF/JSON-schema grammars come through
:class:`cars_sampling.llguidance_backend.LLGuidanceConstraint` when ``llguidance`` is installed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import torch

from cars_sampling.regex import RegexDFA


@runtime_checkable
class Constraint(Protocol):
    """An incremental prefix checker over token ids (the protocol every backend follows)."""

    vocab_size: int
    eos_token_ids: frozenset[int]

    def reset(self) -> None:
        """Go back to the empty prefix."""

    def advance(self, token_id: int) -> bool:
        """Append ``token_id``; ``False`` if the prefix can no longer be completed into the language."""

    def allowed_mask(self) -> torch.Tensor:
        """Bool ``[vocab_size]``: tokens that keep the prefix completable (EOS iff accepting)."""

    def is_accepting(self) -> bool:
        """Whether the current prefix is itself a string of the language."""


def _eos_set(eos_token_ids: int | Sequence[int], vocab_size: int) -> frozenset[int]:
    ids = [eos_token_ids] if isinstance(eos_token_ids, int) else list(eos_token_ids)
    if not ids:
        raise ValueError("eos_token_ids must name at least one stop token, got an empty list")
    for t in ids:
        if not isinstance(t, int) or not 0 <= t < vocab_size:
            raise ValueError(f"eos token id {t!r} is not an int in [0, vocab_size={vocab_size})")
    return frozenset(ids)


def fingerprint_of(constraint: Constraint) -> str:
    """A string that changes when the constraint's language changes (used to detect a new grammar)."""
    fp = getattr(constraint, "fingerprint", None)
    return str(fp) if fp is not None else f"id:{id(constraint)}"


def special_ids(tokenizer: Any) -> set[int]:
    """Ids of the tokenizer's special tokens: ``all_special_ids`` and added tokens marked special."""
    ids = {int(t) for t in getattr(tokenizer, "all_special_ids", ()) if t is not None}
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    ids.update(int(i) for i, tok in added.items() if getattr(tok, "special", False))
    return ids


def token_strings(tokenizer: Any) -> list[str | None]:
    """The text of every token id of a Hugging Face tokenizer, ``None`` for tokens no grammar may use.

    Special tokens (:func:`special_ids`: ``all_special_ids`` and added tokens marked special, the
    same set the llguidance backend bans) are ``None``: a grammar never produces them, so they cannot
    be smuggled into a "valid" string. Byte-level tokens that are not whole UTF-8 characters decode
    to U+FFFD and are ``None`` too, which is exact for grammars over text: no valid text contains them.
    SentencePiece pieces that start with "▁" get their leading space back.
    """
    special = special_ids(tokenizer)
    out: list[str | None] = []
    for i in range(len(tokenizer)):
        if i in special:
            out.append(None)
            continue
        text = tokenizer.decode([i])
        # SentencePiece drops the leading-space marker when a token is decoded alone.
        piece = (
            tokenizer.convert_ids_to_tokens(i)
            if hasattr(tokenizer, "convert_ids_to_tokens")
            else ""
        )
        if isinstance(piece, str) and piece.startswith("\u2581") and not text.startswith(" "):
            text = " " + text
        out.append(None if "\ufffd" in text else text)
    return out


class Automaton(Protocol):
    """What :class:`DFAConstraint` needs from a DFA: dead states are those that are not ``live``."""

    @property
    def start(self) -> Any: ...

    def step(self, state: Any, symbol: Any) -> Any: ...

    def accepting(self, state: Any) -> bool: ...

    def live(self, state: Any) -> bool: ...


class TableDFA:
    """An explicit DFA: ``transitions[(state, symbol)] = next_state``; missing moves go to a dead state.

    States that cannot reach an accepting state are dead too (computed once), so masks are exact.
    """

    def __init__(
        self,
        transitions: Mapping[Any, Hashable],
        start: Hashable,
        accepting: Sequence[Hashable] | set[Hashable] | frozenset[Hashable],
    ) -> None:
        self.transitions = dict(transitions)
        self.start = start
        self.accepting_states = frozenset(accepting)
        preds: dict[Hashable, set[Hashable]] = {}
        for (s, _), t in self.transitions.items():
            preds.setdefault(t, set()).add(s)
        live = set(self.accepting_states)
        stack = list(live)
        while stack:
            for p in preds.get(stack.pop(), ()):
                if p not in live:
                    live.add(p)
                    stack.append(p)
        self._live = frozenset(live)

    def step(self, state: Hashable, symbol: Hashable) -> Hashable:
        return self.transitions.get((state, symbol))

    def accepting(self, state: Hashable) -> bool:
        return state in self.accepting_states

    def live(self, state: Hashable) -> bool:
        return state is not None and state in self._live


class DFAConstraint:
    """A constraint given by an automaton over the symbols the tokens spell.

    ``vocab[i]`` is the symbol sequence of token ``i`` (its text, for a character-level DFA; ``(i,)``
    for a token-level one) or ``None`` for a token that is never allowed. ``eos_token_ids`` end a
    string and are allowed exactly in accepting states. Masks are cached per automaton state and
    computed by walking a trie of the token spellings, so each costs at most one pass over the
    vocabulary's characters.
    """

    def __init__(
        self,
        automaton: Automaton,
        vocab: Sequence[Sequence[Hashable] | None],
        eos_token_ids: int | Sequence[int],
        *,
        vocab_size: int | None = None,
        fingerprint: str | None = None,
    ) -> None:
        self.vocab_size = len(vocab) if vocab_size is None else int(vocab_size)
        if self.vocab_size < len(vocab):
            raise ValueError(
                f"vocab_size={self.vocab_size} is smaller than the {len(vocab)} token spellings given"
            )
        self.eos_token_ids = _eos_set(eos_token_ids, self.vocab_size)
        self.automaton = automaton
        self.vocab = list(vocab)
        # Symbol trie of the spellings: node = (children, token ids ending here).
        self._spellings: tuple[dict, list[int]] = ({}, [])
        for tok, spelling in enumerate(self.vocab):
            if spelling is None or tok in self.eos_token_ids:
                continue
            node = self._spellings
            for sym in spelling:
                node = node[0].setdefault(sym, ({}, []))
            node[1].append(tok)
        self._masks: dict[Hashable, torch.Tensor] = {}
        digest = hashlib.sha256(repr((self.vocab, sorted(self.eos_token_ids))).encode()).hexdigest()
        self.fingerprint = f"dfa:{fingerprint or id(automaton)}:{digest[:16]}"
        self.reset()

    @classmethod
    def from_regex(
        cls,
        pattern: str,
        vocab: Sequence[str | None] | Any,
        eos_token_ids: int | Sequence[int] | None = None,
        *,
        vocab_size: int | None = None,
    ) -> DFAConstraint:
        """A character-level constraint from a full-match regular expression.

        ``vocab`` is a list of token texts (``None`` for unusable tokens) or a Hugging Face tokenizer
        (see :func:`token_strings`); with a tokenizer, ``eos_token_ids`` defaults to its EOS id.
        """
        if not isinstance(vocab, Sequence):
            tokenizer = vocab
            vocab = token_strings(tokenizer)
            if eos_token_ids is None:
                eos_token_ids = tokenizer.eos_token_id
        if eos_token_ids is None:
            raise ValueError("eos_token_ids is required when vocab is a list of token texts")
        return cls(
            RegexDFA(pattern),
            vocab,
            eos_token_ids,
            vocab_size=vocab_size,
            fingerprint=f"regex:{pattern}",
        )

    @classmethod
    def from_transitions(
        cls,
        transitions: dict[tuple[Hashable, int], Hashable],
        start: Hashable,
        accepting: Sequence[Hashable] | set[Hashable],
        vocab_size: int,
        eos_token_ids: int | Sequence[int],
    ) -> DFAConstraint:
        """A token-level constraint: ``transitions[(state, token_id)] = next_state``."""
        eos = _eos_set(eos_token_ids, vocab_size)
        vocab = [None if t in eos else (t,) for t in range(vocab_size)]
        key = repr(sorted(transitions.items(), key=repr)) + repr(
            (start, sorted(accepting, key=repr))
        )
        return cls(
            TableDFA(transitions, start, accepting),
            vocab,
            eos_token_ids,
            fingerprint=hashlib.sha256(key.encode()).hexdigest()[:16],
        )

    # -- protocol ------------------------------------------------------------------------------
    def reset(self) -> None:
        self._state: Any = self.automaton.start
        self._dead = not self.automaton.live(self._state)
        self._finished = False

    def _walk(self, state: Any, spelling: Sequence[Hashable]) -> Any:
        for sym in spelling:
            state = self.automaton.step(state, sym)
            if not self.automaton.live(state):
                return None
        return state

    def advance(self, token_id: int) -> bool:
        if self._dead or self._finished:
            self._dead = True
            return False
        if token_id in self.eos_token_ids:
            self._finished = True
            self._dead = not self.automaton.accepting(self._state)
            return not self._dead
        spelling = self.vocab[token_id] if 0 <= token_id < len(self.vocab) else None
        nxt = None if spelling is None else self._walk(self._state, spelling)
        if nxt is None:
            self._dead = True
            return False
        self._state = nxt
        return True

    def is_accepting(self) -> bool:
        return not self._dead and not self._finished and self.automaton.accepting(self._state)

    def allowed_mask(self) -> torch.Tensor:
        if self._dead or self._finished:
            return torch.zeros(self.vocab_size, dtype=torch.bool)
        mask = self._masks.get(self._state)
        if mask is None:
            mask = self._compute_mask(self._state)
            self._masks[self._state] = mask
        return mask.clone()

    def _compute_mask(self, state: Any) -> torch.Tensor:
        mask = torch.zeros(self.vocab_size, dtype=torch.bool)
        stack = [(self._spellings, state)]
        while stack:
            (children, ends), s = stack.pop()
            if ends:
                mask[ends] = True
            for sym, child in children.items():
                nxt = self.automaton.step(s, sym)
                if self.automaton.live(nxt):
                    stack.append((child, nxt))
        if self.automaton.accepting(state):
            mask[list(self.eos_token_ids)] = True
        return mask

    def decode(self, token_ids: Sequence[int]) -> str:
        """The text of a token sequence, for character-level vocabularies."""
        return "".join(
            s if isinstance(s, str) else "".join(map(str, s))
            for s in (self.vocab[t] for t in token_ids)
            if s is not None
        )


class PrefixPredicateConstraint:
    """A semantic check on token prefixes, optionally on top of a ``base`` constraint.

    ``predicate(prefix)`` must be ``True`` for every prefix of a valid string (it says "may still be
    valid"); ``accept(tokens)``, when given, says whether a finished string is valid. Masks call the
    predicate once per token the base allows, so keep it cheap.
    """

    def __init__(
        self,
        predicate: Callable[[Sequence[int]], bool],
        *,
        vocab_size: int | None = None,
        eos_token_ids: int | Sequence[int] | None = None,
        accept: Callable[[Sequence[int]], bool] | None = None,
        base: Constraint | None = None,
    ) -> None:
        if not callable(predicate):
            raise TypeError(f"predicate must be callable, got {type(predicate).__name__}")
        if base is not None:
            vocab_size = base.vocab_size if vocab_size is None else vocab_size
            eos_token_ids = sorted(base.eos_token_ids) if eos_token_ids is None else eos_token_ids
        if vocab_size is None or eos_token_ids is None:
            raise ValueError(
                "pass vocab_size and eos_token_ids, or a base constraint to take them from"
            )
        self.vocab_size = int(vocab_size)
        self.eos_token_ids = _eos_set(eos_token_ids, self.vocab_size)
        self.predicate = predicate
        self.accept = accept
        self.base = base
        inner = fingerprint_of(base) if base is not None else ""
        self.fingerprint = f"predicate:{id(predicate)}:{id(accept)}:{inner}"
        self.reset()

    def reset(self) -> None:
        self._prefix: list[int] = []
        self._dead = False
        self._finished = False
        if self.base is not None:
            self.base.reset()

    def is_accepting(self) -> bool:
        if self._dead or self._finished:
            return False
        if self.base is not None and not self.base.is_accepting():
            return False
        return self.accept is None or bool(self.accept(self._prefix))

    def advance(self, token_id: int) -> bool:
        if self._dead or self._finished:
            self._dead = True
            return False
        if token_id in self.eos_token_ids:
            ok = self.is_accepting()
            self._finished = True
            self._dead = not ok
            return ok
        ok = (
            self.base.advance(token_id)
            if self.base is not None
            else 0 <= token_id < self.vocab_size
        )
        ok = ok and bool(self.predicate([*self._prefix, token_id]))
        self._prefix.append(token_id)
        self._dead = not ok
        return ok

    def allowed_mask(self) -> torch.Tensor:
        if self._dead or self._finished:
            return torch.zeros(self.vocab_size, dtype=torch.bool)
        if self.base is not None:
            mask = self.base.allowed_mask().clone()
        else:
            mask = torch.ones(self.vocab_size, dtype=torch.bool)
        for tok in mask.nonzero().flatten().tolist():
            if tok not in self.eos_token_ids and not self.predicate([*self._prefix, tok]):
                mask[tok] = False
        eos = list(self.eos_token_ids)
        mask[eos] = self.is_accepting()
        return mask

    def decode(self, token_ids: Sequence[int]) -> str:
        """The base constraint's text for ``token_ids`` (ids joined by spaces without one)."""
        decode = getattr(self.base, "decode", None)
        return decode(token_ids) if callable(decode) else " ".join(map(str, token_ids))


def accept_all(vocab_size: int, eos_token_ids: int | Sequence[int]) -> PrefixPredicateConstraint:
    """The constraint whose language is every string: all styles then reduce to ancestral sampling."""
    return PrefixPredicateConstraint(
        lambda prefix: True, vocab_size=vocab_size, eos_token_ids=eos_token_ids
    )
