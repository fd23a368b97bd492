"""A small byte-level BPE tokenizer trained on the standard-library corpus, cached on disk."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from shared_core.data.cache import atomic_directory, cache_dir, recipe_hash
from shared_core.data.text import stdlib_corpus

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

# Role -> token text. Masked-diffusion LMs need the pad and mask ids; the order fixes ids 0..4.
SPECIAL_TOKENS: dict[str, str] = {
    "pad_token": "<|pad|>",
    "bos_token": "<|bos|>",
    "eos_token": "<|eos|>",
    "mask_token": "<|mask|>",
    "unk_token": "<|unk|>",
}
_BYTE_ALPHABET_SIZE = 256
_RECIPE_FORMAT = 1  # bump when the training procedure changes, so old caches are not reused
_LINES_PER_CHUNK = 1_000


def _import_tokenizers() -> tuple[Any, type[PreTrainedTokenizerFast]]:
    try:
        import tokenizers
        from transformers import PreTrainedTokenizerFast
    except ImportError as exc:
        raise ImportError(
            "bpe_tokenizer needs tokenizers and transformers: pip install 'shared-core[data]'"
        ) from exc
    return tokenizers, PreTrainedTokenizerFast


def bpe_tokenizer(
    vocab_size: int = 512, corpus_bytes: int = 1_000_000, seed: int = 0
) -> PreTrainedTokenizerFast:
    """Byte-level BPE tokenizer trained on :func:`stdlib_corpus`, cached under the cache dir.

    The first call trains (a second or two for 1 MB) and saves with ``save_pretrained``
    under ``cache_dir("tokenizers", ...)``, keyed by a hash of the recipe (vocab size,
    corpus bytes, seed, Python version, tokenizers version); later calls load that folder.
    Every byte is in the base alphabet, so ``decode(encode(text)) == text`` for any
    Unicode text. No special tokens are added on encode; ``pad``/``bos``/``eos``/``mask``/
    ``unk`` exist with ids 0-4 (see :data:`SPECIAL_TOKENS`).
    """
    min_size = _BYTE_ALPHABET_SIZE + len(SPECIAL_TOKENS)
    if not isinstance(vocab_size, int) or vocab_size < min_size:
        raise ValueError(
            f"vocab_size must be an int >= {min_size} (256 bytes + special tokens), "
            f"got {vocab_size!r}"
        )
    tokenizers, fast_cls = _import_tokenizers()
    recipe = {
        "kind": "bpe-bytelevel-stdlib",
        "format": _RECIPE_FORMAT,
        "vocab_size": vocab_size,
        "corpus_bytes": corpus_bytes,
        "seed": seed,
        "python": list(sys.version_info[:3]),
        "tokenizers": tokenizers.__version__,
    }
    path = cache_dir("tokenizers") / f"bpe-{vocab_size}-{recipe_hash(recipe)}"
    if not (path / "tokenizer.json").is_file():
        with atomic_directory(path) as tmp:
            _train_bpe(vocab_size, corpus_bytes, seed).save_pretrained(tmp)
    return fast_cls.from_pretrained(path)


def _train_bpe(vocab_size: int, corpus_bytes: int, seed: int) -> PreTrainedTokenizerFast:
    tokenizers, fast_cls = _import_tokenizers()
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.BPE())
    # add_prefix_space=False keeps the exact input text: no space is invented on decode.
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS.values()),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = stdlib_corpus(max_bytes=corpus_bytes, seed=seed)
    # Feed whole lines so no word is cut in two between chunks.
    lines = corpus.splitlines(keepends=True)
    chunks = [
        "".join(lines[i : i + _LINES_PER_CHUNK]) for i in range(0, len(lines), _LINES_PER_CHUNK)
    ]
    tok.train_from_iterator(chunks, trainer=trainer, length=len(chunks))
    return fast_cls(
        tokenizer_object=tok,
        # Tokenization-space clean-up would rewrite " ," to "," on decode and break round trips.
        clean_up_tokenization_spaces=False,
        model_max_length=sys.maxsize,
        **SPECIAL_TOKENS,
    )
