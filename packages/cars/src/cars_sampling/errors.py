"""The package's exceptions: each names what was wrong and what was expected."""

from __future__ import annotations


class GrammarError(ValueError):
    """A grammar or regular expression that does not compile, or that the backend refuses."""


class TrieMemoryError(MemoryError):
    """The sampler's trie grew past its ``max_trie_bytes`` limit."""
