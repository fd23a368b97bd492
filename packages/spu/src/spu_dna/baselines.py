"""The peers of the reproduction in the models' API: ``model(input_ids, attention_mask, labels)``
returns a ``SequenceClassifierOutput``.

``CNNClassifier`` (genomic-benchmarks' 3-layer CNN), ``TransformerClassifier`` (SDPA attention through
``nn.TransformerEncoder``), ``HyenaClassifier`` (Hyena-like order-2 gated FFT long convolution with an
implicit filter, pure torch) and ``MambaClassifier`` (transformers' ``MambaModel`` on its CPU path,
mambapy's parallel scan when installed).
"""

from __future__ import annotations

import importlib.util
import math

import torch
from torch import nn
from transformers.modeling_outputs import SequenceClassifierOutput

from spu_dna.functional import fft_conv, fft_size, masked_mean

__all__ = [
    "BASELINES",
    "CNNClassifier",
    "HyenaClassifier",
    "MambaClassifier",
    "TransformerClassifier",
]


class _Classifier(nn.Module):
    """Shared head: masked mean pool, linear, cross-entropy."""

    def __init__(self, width: int, num_labels: int) -> None:
        super().__init__()
        self.head = nn.Linear(width, num_labels)

    def features(self, input_ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        raise NotImplementedError

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> SequenceClassifierOutput:
        logits = self.head(self.features(input_ids, attention_mask))
        loss = None if labels is None else nn.functional.cross_entropy(logits, labels)
        return SequenceClassifierOutput(loss=loss, logits=logits)


class CNNClassifier(_Classifier):
    """Embedding, three (conv width 9, ReLU, max-pool 2) stages, global mean: receptive field 57 bp."""

    def __init__(
        self, vocab_size: int = 10, d_model: int = 64, kernel: int = 9, num_labels: int = 2
    ) -> None:
        super().__init__(d_model, num_labels)
        self.embed = nn.Embedding(vocab_size, d_model)
        self.convs = nn.ModuleList(
            nn.Conv1d(d_model, d_model, kernel, padding="same") for _ in range(3)
        )

    def features(self, input_ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        x = self.embed(input_ids).transpose(1, 2)
        m = torch.ones_like(input_ids, dtype=x.dtype) if mask is None else mask.to(x.dtype)
        for conv in self.convs:
            x = torch.relu(conv(x * m.unsqueeze(1)))
            x, m = nn.functional.max_pool1d(x, 2), nn.functional.max_pool1d(m.unsqueeze(1), 2)[:, 0]
        return masked_mean(x.transpose(1, 2), m)


def _sinusoids(length: int, dim: int, device: torch.device) -> torch.Tensor:
    position = torch.arange(length, device=device, dtype=torch.float32).unsqueeze(1)
    freq = torch.exp(torch.arange(0, dim, 2, device=device) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim, device=device)
    table[:, 0::2], table[:, 1::2] = torch.sin(position * freq), torch.cos(position * freq)
    return table


class TransformerClassifier(_Classifier):
    """Pre-norm Transformer encoder (SDPA attention) with sinusoidal positions over k-mer tokens.

    The tokens entering attention are k-mers, as in the peers' DNA Transformers (DNABERT's and the
    Nucleotide Transformer's 6-mer tokens, Enformer's convolutional stem): a width-``kmer``
    convolution over the base embeddings. On single-base tokens (``kmer=1``) attention must learn
    local order from positions alone: at the reproduction's budget it stayed at chance on every task,
    even the 12-bp motif, at every lr from 1e-4 to 3e-3 and over 5x the steps (issue 22).
    """

    def __init__(
        self,
        vocab_size: int = 10,
        d_model: int = 64,
        n_layers: int = 2,
        n_heads: int = 4,
        num_labels: int = 2,
        kmer: int = 5,
    ) -> None:
        super().__init__(d_model, num_labels)
        if kmer < 1 or kmer % 2 == 0:
            raise ValueError(f"kmer must be a positive odd width (centred tokens), got {kmer}")
        self.embed = nn.Embedding(vocab_size, d_model)
        self.kmer = nn.Conv1d(d_model, d_model, kmer, padding=kmer // 2) if kmer > 1 else None
        layer = nn.TransformerEncoderLayer(
            d_model, n_heads, 4 * d_model, dropout=0.0, batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)

    def features(self, input_ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        x = self.embed(input_ids)
        if self.kmer is not None:
            if mask is not None:  # padding contributes nothing to a real position's k-mer
                x = x * mask.unsqueeze(-1).to(x.dtype)
            x = self.kmer(x.transpose(1, 2)).transpose(1, 2)
        x = x + _sinusoids(x.shape[1], x.shape[2], x.device).to(x.dtype)
        pad = None if mask is None else mask == 0
        return masked_mean(self.norm(self.encoder(x, src_key_padding_mask=pad)), mask)


class _HyenaOperator(nn.Module):
    """Order-2 Hyena: ``y = x2 * (h * (x1 * v))`` with a causal implicit long filter ``h``."""

    def __init__(self, d_model: int, filter_dim: int = 16, short: int = 3) -> None:
        super().__init__()
        self.in_proj = nn.Linear(d_model, 3 * d_model)
        self.short = nn.Conv1d(
            3 * d_model, 3 * d_model, short, padding=short - 1, groups=3 * d_model
        )
        self.filter_mlp = nn.Sequential(
            nn.Linear(filter_dim, filter_dim), nn.SiLU(), nn.Linear(filter_dim, d_model)
        )
        self.decay = nn.Parameter(torch.linspace(0.3, 3.0, d_model))
        self.filter_dim = filter_dim
        self.out_proj = nn.Linear(d_model, d_model)

    def long_filter(self, length: int, device: torch.device) -> torch.Tensor:
        dtype = self.decay.dtype
        t = torch.linspace(0, 1, length, device=device, dtype=dtype).unsqueeze(1)
        h = self.filter_mlp(_sinusoids(length, self.filter_dim, device).to(dtype))
        return (h * torch.exp(-self.decay.abs() * t * 10)).transpose(0, 1)  # (d, L)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        length = x.shape[1]
        if mask is not None:
            x = x * mask.unsqueeze(-1).to(x.dtype)
        u = self.short(self.in_proj(x).transpose(1, 2))[..., :length].transpose(1, 2)
        v, x1, x2 = u.chunk(3, dim=-1)
        n = fft_size(length, "linear")
        spectrum = torch.fft.rfft(self.long_filter(length, x.device), n=n)
        return self.out_proj(x2 * fft_conv(x1 * v, spectrum, n))


class HyenaClassifier(_Classifier):
    """Pre-norm blocks of a Hyena operator and an MLP."""

    def __init__(
        self, vocab_size: int = 10, d_model: int = 64, n_layers: int = 2, num_labels: int = 2
    ) -> None:
        super().__init__(d_model, num_labels)
        self.embed = nn.Embedding(vocab_size, d_model)
        self.mixers = nn.ModuleList(_HyenaOperator(d_model) for _ in range(n_layers))
        self.mlps = nn.ModuleList(
            nn.Sequential(
                nn.Linear(d_model, 2 * d_model), nn.GELU(), nn.Linear(2 * d_model, d_model)
            )
            for _ in range(n_layers)
        )
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(2 * n_layers + 1))

    def features(self, input_ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        x = self.embed(input_ids)
        for i, (mixer, mlp) in enumerate(zip(self.mixers, self.mlps, strict=True)):
            x = x + mixer(self.norms[2 * i](x), mask)
            x = x + mlp(self.norms[2 * i + 1](x))
        return masked_mean(self.norms[-1](x), mask)


class MambaClassifier(_Classifier):
    """transformers' ``MambaModel`` (its pure-PyTorch path on CPU) with a mean-pooled head."""

    def __init__(
        self,
        vocab_size: int = 10,
        d_model: int = 64,
        n_layers: int = 4,
        state_size: int = 16,
        num_labels: int = 2,
    ) -> None:
        from transformers import MambaConfig, MambaModel

        super().__init__(d_model, num_labels)
        config = MambaConfig(
            vocab_size=vocab_size,
            hidden_size=d_model,
            state_size=state_size,
            num_hidden_layers=n_layers,
            # mambapy's parallel scan where installed, else transformers' sequential scan
            use_mambapy=importlib.util.find_spec("mambapy") is not None,
        )
        self.mamba = MambaModel(config)

    def features(self, input_ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        hidden = self.mamba(input_ids=input_ids, attention_mask=mask).last_hidden_state
        return masked_mean(hidden, mask)


BASELINES: dict[str, type[_Classifier]] = {
    "CNN": CNNClassifier,
    "Transformer": TransformerClassifier,
    "Hyena": HyenaClassifier,
    "Mamba": MambaClassifier,
}
