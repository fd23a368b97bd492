"""A character-level DNA tokenizer (as HyenaDNA's and Caduceus's) as a transformers tokenizer.

One token per base, no special tokens added, so position ``t`` of the ids (and of the saliency map) is
base ``t`` of the sequence. Lowercase (soft-masked) bases are uppercased silently. Characters outside
``ACGTN`` raise a ``ValueError`` listing them, or become ``N`` with ``unknown="N"``.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedTokenizer

__all__ = ["BASES", "COMPLEMENT", "SPECIAL_TOKENS", "DNATokenizer", "complement_permutation"]

SPECIAL_TOKENS = ("[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]")
BASES = "ACGTN"
COMPLEMENT = {"A": "T", "C": "G", "G": "C", "T": "A", "N": "N"}
VOCAB = {token: i for i, token in enumerate((*SPECIAL_TOKENS, *BASES))}
UNKNOWN = ("error", "N")


class DNATokenizer(PreTrainedTokenizer):
    """``tok(["ACGT", "acgn"], padding=True, return_tensors="pt")``: ids 0-4 are
    ``[PAD] [CLS] [SEP] [MASK] [UNK]``, 5-9 are ``A C G T N``."""

    vocab_files_names = {"vocab_file": "vocab.json"}  # noqa: RUF012 (transformers API)
    model_input_names = ["input_ids", "attention_mask"]  # noqa: RUF012

    def __init__(
        self, vocab_file: str | None = None, unknown: str = "error", **kwargs: Any
    ) -> None:
        if unknown not in UNKNOWN:
            raise ValueError(f"unknown must be one of {UNKNOWN}, got {unknown!r}")
        if vocab_file is not None:
            with open(vocab_file) as f:
                if json.load(f) != VOCAB:
                    raise ValueError(f"{vocab_file} is not the DNA vocabulary {VOCAB}")
        self.unknown = unknown
        for key, token in zip(
            ("pad_token", "cls_token", "sep_token", "mask_token", "unk_token"),
            SPECIAL_TOKENS,
            strict=True,
        ):
            kwargs.setdefault(key, token)
        kwargs.setdefault("model_max_length", 1 << 20)
        super().__init__(unknown=unknown, **kwargs)

    @property
    def vocab_size(self) -> int:
        return len(VOCAB)

    def get_vocab(self) -> dict[str, int]:
        return dict(VOCAB)

    def _clean(self, text: str) -> str:
        text = text.upper()
        bad = sorted(set(text) - set(BASES))
        if bad and self.unknown == "error":
            raise ValueError(
                f"characters outside ACGTN in the sequence: {bad}; map them to N with "
                "DNATokenizer(unknown='N')"
            )
        return text.translate({ord(c): "N" for c in bad}) if bad else text

    def _tokenize(self, text: str, **kwargs: Any) -> list[str]:
        return list(self._clean(text))

    def _convert_token_to_id(self, token: str) -> int:
        return VOCAB.get(token, VOCAB["[UNK]"])

    def _convert_id_to_token(self, index: int) -> str:
        return (*SPECIAL_TOKENS, *BASES)[index]

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        return "".join(tokens)

    def save_vocabulary(
        self, save_directory: str, filename_prefix: str | None = None
    ) -> tuple[str]:
        path = os.path.join(save_directory, (filename_prefix or "") + "vocab.json")
        with open(path, "w") as f:
            json.dump(VOCAB, f)
        return (path,)

    # -- vectorised paths: generated data sets are thousands of kilobase sequences ------------
    def encode_batch(self, sequences: list[str]) -> dict[str, torch.Tensor]:
        """``input_ids`` and ``attention_mask`` for ``sequences``, right-padded; the same ids as
        ``self(sequences, padding=True)`` through a lookup table instead of per-character Python."""
        if not sequences:
            raise ValueError("encode_batch needs at least one sequence")
        width = max(len(s) for s in sequences)
        ids = np.zeros((len(sequences), width), dtype=np.int64)
        mask = np.zeros((len(sequences), width), dtype=np.int64)
        for i, seq in enumerate(sequences):
            ids[i, : len(seq)] = _TABLE[np.frombuffer(self._clean(seq).encode(), dtype=np.uint8)]
            mask[i, : len(seq)] = 1
        return {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(mask)}


def complement_permutation() -> torch.Tensor:
    """``perm[id]`` is the id of the complement base (special tokens map to themselves)."""
    perm = torch.arange(len(VOCAB))
    for base, comp in COMPLEMENT.items():
        perm[VOCAB[base]] = VOCAB[comp]
    return perm


_TABLE = np.full(256, VOCAB["N"], dtype=np.int64)
for _base in BASES:
    _TABLE[ord(_base)] = VOCAB[_base]
