"""A small regular-expression compiler to a lazily built DFA, in pure Python.

The sampler needs, for a prefix, whether it can still be extended to a full match (a *live* state),
which Python's ``re`` cannot answer. This module parses a regex (literals, ``.``, classes ``[a-z]``
``[^...]``, escapes ``\\d \\w \\s``, groups ``(...)`` ``(?:...)``, ``|``, ``* + ?``, ``{m}``
``{m,}`` ``{m,n}``), builds a Thompson NFA and determinises it on demand (subset construction,
memoised per (state, character)). Matching is always a full match: ``^`` and ``$`` are refused.
"""

from __future__ import annotations

import dataclasses
import string
from collections.abc import Iterable
from typing import Any

from cars_sampling.errors import GrammarError

_DIGITS = frozenset(string.digits)
_WORD = frozenset(string.ascii_letters + string.digits + "_")
_SPACE = frozenset(" \t\n\r\f\v")
_SPECIAL = set("()[]{}|*+?.\\^$")


@dataclasses.dataclass(frozen=True)
class CharSet:
    """A set of characters: explicit ``chars`` plus inclusive ``ranges``, possibly ``negated``."""

    chars: frozenset[str] = frozenset()
    ranges: tuple[tuple[str, str], ...] = ()
    negated: bool = False

    def __contains__(self, ch: str) -> bool:
        hit = ch in self.chars
        if not hit:
            for lo, hi in self.ranges:  # a plain loop: this is the DFA builder's hot spot
                if lo <= ch <= hi:
                    hit = True
                    break
        return hit != self.negated


_ANY = CharSet(frozenset("\n"), negated=True)  # "." matches anything but a newline, as in `re`


class _Parser:
    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0

    def error(self, what: str) -> GrammarError:
        return GrammarError(f"regex {self.p!r}: {what} at position {self.i}")

    def peek(self) -> str | None:
        return self.p[self.i] if self.i < len(self.p) else None

    def take(self) -> str:
        if self.i >= len(self.p):
            raise self.error("unexpected end of pattern")
        ch = self.p[self.i]
        self.i += 1
        return ch

    def parse(self) -> tuple:
        node = self.alt()
        if self.i != len(self.p):
            raise self.error(f"unexpected {self.p[self.i]!r}")
        return node

    def alt(self) -> tuple:
        branches = [self.cat()]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.cat())
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def cat(self) -> tuple:
        items = []
        while self.peek() not in (None, "|", ")"):
            items.append(self.repeat())
        return ("cat", items)

    def repeat(self) -> tuple:
        node = self.atom()
        while True:
            ch = self.peek()
            if ch == "*":
                bounds: tuple[int, int | None] = (0, None)
            elif ch == "+":
                bounds = (1, None)
            elif ch == "?":
                bounds = (0, 1)
            elif ch == "{" and self._counted():
                self.i += 1
                bounds = self._bounds()
                node = ("rep", node, *bounds)
                continue
            else:
                return node
            self.i += 1
            node = ("rep", node, *bounds)

    def _counted(self) -> bool:
        j = self.i + 1
        return j < len(self.p) and self.p[j].isdigit()

    def _number(self) -> int:
        start = self.i
        while (ch := self.peek()) is not None and ch.isdigit():
            self.i += 1
        if start == self.i:
            raise self.error("expected a number in {m,n}")
        return int(self.p[start : self.i])

    def _bounds(self) -> tuple[int, int | None]:
        lo = self._number()
        hi: int | None = lo
        if self.peek() == ",":
            self.i += 1
            hi = None if self.peek() == "}" else self._number()
        if self.take() != "}":
            raise self.error("expected '}'")
        if hi is not None and hi < lo:
            raise self.error(f"bad repetition {{{lo},{hi}}}")
        return lo, hi

    def atom(self) -> tuple:
        ch = self.take()
        if ch == "(":
            if self.p.startswith("?:", self.i):
                self.i += 2
            elif self.peek() == "?":
                raise self.error("only (?:...) groups are supported")
            node = self.alt()
            if self.take() != ")":
                raise self.error("expected ')'")
            return node
        if ch == "[":
            return ("set", self.charclass())
        if ch == ".":
            return ("set", _ANY)
        if ch == "\\":
            return ("set", self.escape())
        if ch in "^$":
            raise self.error("anchors are implicit (full match); remove '^'/'$'")
        if ch in _SPECIAL:
            raise self.error(f"unexpected {ch!r}")
        return ("set", CharSet(frozenset(ch)))

    def escape(self) -> CharSet:
        ch = self.take()
        classes = {"d": _DIGITS, "w": _WORD, "s": _SPACE}
        if ch in classes:
            return CharSet(classes[ch])
        if ch.isupper() and ch.lower() in classes:
            return CharSet(classes[ch.lower()], negated=True)
        named = {"n": "\n", "t": "\t", "r": "\r"}
        return CharSet(frozenset(named.get(ch, ch)))

    def charclass(self) -> CharSet:
        negated = self.peek() == "^"
        if negated:
            self.i += 1
        chars: set[str] = set()
        ranges: list[tuple[str, str]] = []
        first = True
        while True:
            ch = self.take()
            if ch == "]" and not first:
                break
            first = False
            if ch == "\\":
                esc = self.escape()
                if esc.negated:
                    raise self.error("negated escapes inside [...] are not supported")
                if len(esc.chars) > 1:  # \d, \w, \s inside a class
                    chars |= esc.chars
                    continue
                (ch,) = esc.chars
            if self.peek() == "-" and self.i + 1 < len(self.p) and self.p[self.i + 1] != "]":
                self.i += 1
                hi = self.take()
                if hi == "\\":
                    (hi,) = self.escape().chars
                if hi < ch:
                    raise self.error(f"bad range {ch}-{hi}")
                ranges.append((ch, hi))
            else:
                chars.add(ch)
        return CharSet(frozenset(chars), tuple(ranges), negated)


class _NFA:
    """Thompson NFA: ``eps[s]`` are ε-moves, ``edges[s]`` are (charset, target) moves."""

    def __init__(self) -> None:
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[CharSet, int]]] = []

    def state(self) -> int:
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def build(self, node: tuple) -> tuple[int, int]:
        kind = node[0]
        if kind == "set":
            s, e = self.state(), self.state()
            self.edges[s].append((node[1], e))
            return s, e
        if kind == "cat":
            s = e = self.state()
            for item in node[1]:
                a, b = self.build(item)
                self.eps[e].append(a)
                e = b
            return s, e
        if kind == "alt":
            s, e = self.state(), self.state()
            for branch in node[1]:
                a, b = self.build(branch)
                self.eps[s].append(a)
                self.eps[b].append(e)
            return s, e
        _, inner, lo, hi = node
        s = e = self.state()
        for _ in range(lo):
            a, b = self.build(inner)
            self.eps[e].append(a)
            e = b
        if hi is None:  # Kleene star on the tail
            a, b = self.build(inner)
            self.eps[e].append(a)
            self.eps[b].append(a)
            end = self.state()
            self.eps[e].append(end)
            self.eps[b].append(end)
            return s, end
        end = self.state()
        for _ in range(hi - lo):
            a, b = self.build(inner)
            self.eps[e].append(a)
            self.eps[e].append(end)
            e = b
        self.eps[e].append(end)
        return s, end


class RegexDFA:
    """The DFA of a full-match regex, built lazily; states are frozensets of NFA states.

    ``step(state, ch)`` returns the next state (the empty set is the dead state), ``accepting(state)``
    whether the characters so far form a full match, ``live(state)`` whether some continuation does.
    """

    def __init__(self, pattern: str) -> None:
        if not isinstance(pattern, str):
            raise TypeError(f"pattern must be a str, got {type(pattern).__name__}")
        self.pattern = pattern
        self._nfa = _NFA()
        start, self._accept = self._nfa.build(_Parser(pattern).parse())
        self.start = self._closure([start])
        self._memo: dict[tuple[frozenset[int], str], frozenset[int]] = {}
        self._coreachable = self._backward_reach(self._accept)

    def _closure(self, states: Iterable[int]) -> frozenset[int]:
        stack = list(states)
        seen = set(stack)
        while stack:
            for t in self._nfa.eps[stack.pop()]:
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
        return frozenset(seen)

    def _backward_reach(self, target: int) -> frozenset[int]:
        preds: list[list[int]] = [[] for _ in self._nfa.eps]
        for s, targets in enumerate(self._nfa.eps):
            for t in targets:
                preds[t].append(s)
        for s, edges in enumerate(self._nfa.edges):
            for cs, t in edges:
                # A class that matches nothing (like [^\s\S]) cannot be crossed.
                if cs.negated or cs.chars or cs.ranges:
                    preds[t].append(s)
        seen = {target}
        stack = [target]
        while stack:
            for p in preds[stack.pop()]:
                if p not in seen:
                    seen.add(p)
                    stack.append(p)
        return frozenset(seen)

    def step(self, state: frozenset[int], ch: str) -> frozenset[int]:
        key = (state, ch)
        nxt = self._memo.get(key)
        if nxt is None:
            nxt = self._closure(t for s in state for cs, t in self._nfa.edges[s] if ch in cs)
            self._memo[key] = nxt
        return nxt

    def accepting(self, state: frozenset[int]) -> bool:
        return self._accept in state

    def live(self, state: frozenset[int]) -> bool:
        return not self._coreachable.isdisjoint(state)

    def fullmatch(self, text: str) -> bool:
        """Whether ``text`` matches the whole pattern (the oracle the tests hold against ``re``)."""
        state = self.start
        for ch in text:
            state = self.step(state, ch)
            if not state:
                return False
        return self.accepting(state)


_PRINTABLE = [chr(c) for c in range(32, 127)]


def _charset_members(cs: CharSet) -> list[str]:
    inside = set(cs.chars)
    for lo, hi in cs.ranges:
        inside.update(chr(c) for c in range(ord(lo), ord(hi) + 1))
    if cs.negated:
        return [ch for ch in _PRINTABLE if ch not in inside]
    return sorted(inside)


def random_string(pattern: str, rng: Any, max_extra: int = 3) -> str:
    """A random member of the pattern's language (not uniform): for training data and fuzzing.

    Alternatives are picked uniformly, repetitions take ``lo .. lo + max_extra`` copies (capped by
    the upper bound), negated classes draw from printable ASCII. ``rng`` is a ``numpy`` Generator.
    """

    def gen(node: tuple) -> str:
        kind = node[0]
        if kind == "set":
            members = _charset_members(node[1])
            return members[int(rng.integers(len(members)))] if members else ""
        if kind == "cat":
            return "".join(gen(item) for item in node[1])
        if kind == "alt":
            return gen(node[1][int(rng.integers(len(node[1])))])
        _, inner, lo, hi = node
        top = lo + max_extra if hi is None else min(hi, lo + max_extra)
        return "".join(gen(inner) for _ in range(int(rng.integers(lo, top + 1))))

    return gen(_Parser(pattern).parse())
