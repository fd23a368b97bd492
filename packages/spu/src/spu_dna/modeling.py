"""SPU models as transformers ``PreTrainedModel``s, registered with the Auto classes on import.

``SPUModel`` (backbone), ``SPUForSequenceClassification`` (pooled head) and ``SPUForMaskedLM`` (token
head). Inputs are ``input_ids`` (+ ``attention_mask``) or ``one_hot`` of shape ``(batch, length, 4)`` in
``A C G T`` order. Outputs are transformers ``ModelOutput``s with ``loss`` first (what ``Trainer``
reads) plus ``saliency``: one ``(batch, length)`` token-saliency map per block that has SPL.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PreTrainedModel,
)
from transformers import initialization as init
from transformers.modeling_outputs import BaseModelOutput, MaskedLMOutput, SequenceClassifierOutput

from spu_dna.configuration import SPUConfig
from spu_dna.functional import check_mask, masked_mean
from spu_dna.layers import FILTER_INIT_STD, DomainPlasticity, SPUBlock
from spu_dna.tokenizer import VOCAB, DNATokenizer, complement_permutation

__all__ = [
    "SPUForMaskedLM",
    "SPUForSequenceClassification",
    "SPUModel",
    "SPUModelOutput",
    "SPUPreTrainedModel",
    "check_inputs",
    "reverse_complement_ids",
]

Saliency = tuple[torch.Tensor, ...] | None
_ONE_HOT_IDS = [VOCAB[b] for b in "ACGT"]


@dataclass
class SPUModelOutput(BaseModelOutput):
    saliency: Saliency = None


@dataclass
class SPUSequenceClassifierOutput(SequenceClassifierOutput):
    saliency: Saliency = None


@dataclass
class SPUMaskedLMOutput(MaskedLMOutput):
    saliency: Saliency = None


def reverse_complement_ids(input_ids: torch.Tensor) -> torch.Tensor:
    """The reverse complement of a batch of token ids (the whole row reversed, padding included)."""
    return complement_permutation().to(input_ids.device)[input_ids].flip(-1)


def check_inputs(
    config: SPUConfig,
    input_ids: torch.Tensor | None,
    one_hot: torch.Tensor | None,
    attention_mask: torch.Tensor | None,
) -> int:
    """Validate the inputs at the model's boundary (spec section 8); return the sequence length."""
    if (input_ids is None) == (one_hot is None):
        raise ValueError("pass exactly one of input_ids and one_hot")
    if one_hot is not None:
        if one_hot.dim() != 3 or one_hot.shape[-1] != 4:
            hint = (
                " (that looks like (batch, 4, length): use one_hot.transpose(1, 2))"
                if (one_hot.dim() == 3 and one_hot.shape[1] == 4)
                else ""
            )
            raise ValueError(
                f"one_hot must have layout (batch, length, 4) in A C G T order, got shape "
                f"{tuple(one_hot.shape)}{hint}"
            )
        length = one_hot.shape[1]
        if not bool(torch.isfinite(one_hot).all()):
            raise ValueError("one_hot holds NaN or Inf; expected finite base probabilities")
    else:
        assert input_ids is not None
        if input_ids.dim() != 2:
            raise ValueError(
                f"input_ids must be (batch, length), got shape {tuple(input_ids.shape)}"
            )
        length = input_ids.shape[1]
        _check_ids(input_ids, config.vocab_size)
        if attention_mask is None and bool((input_ids == config.pad_token_id).any()):
            raise ValueError(
                f"input_ids hold padding (id {config.pad_token_id}) but no attention_mask was given: "
                "sequences of unequal length need the mask, or padding leaks into the FFT mixing"
            )
    if length == 0 or length < config.lpl_kernel:
        raise ValueError(
            f"sequence length {length} is shorter than lpl_kernel={config.lpl_kernel} (or empty)"
        )
    if (
        attention_mask is not None
        and tuple(attention_mask.shape)
        != (
            (input_ids if input_ids is not None else one_hot).shape[:2]  # type: ignore[union-attr]
        )
    ):
        raise ValueError(
            f"attention_mask has shape {tuple(attention_mask.shape)}, expected (batch, length)"
        )
    if attention_mask is not None:
        check_mask(attention_mask)
    return length


def _check_ids(input_ids: torch.Tensor, vocab_size: int) -> None:
    if input_ids.is_floating_point() or input_ids.is_complex() or input_ids.dtype == torch.bool:
        raise ValueError(
            f"input_ids must be integer token ids in [0, {vocab_size}), got dtype {input_ids.dtype}"
        )
    bad = input_ids[(input_ids < 0) | (input_ids >= vocab_size)]
    if bad.numel():
        raise ValueError(
            f"input_ids {sorted(set(bad.unique().tolist()))} are outside the vocabulary "
            f"[0, {vocab_size}) (vocab_size={vocab_size})"
        )


class SPUPreTrainedModel(PreTrainedModel):
    config_class = SPUConfig
    config: SPUConfig
    base_model_prefix = "spu"
    main_input_name = "input_ids"

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        # LeCun-normal weights (std 1/sqrt(fan_in)), not GPT's fixed 0.02: at d = 64 a 0.02 init
        # leaves every gate near its midpoint and the blocks close to linear.
        if isinstance(module, nn.Linear | nn.Conv1d):
            fan_in = module.weight[0].numel()
            init.normal_(module.weight, std=fan_in**-0.5)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, std=1.0)
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            init.zeros_(module.bias)
        elif isinstance(module, DomainPlasticity) and module.use_freq:
            init.normal_(module.filter, std=FILTER_INIT_STD)


class SPUModel(SPUPreTrainedModel):
    """Embedding and ``n_layers`` SPU blocks with a final LayerNorm."""

    def __init__(self, config: SPUConfig) -> None:
        super().__init__(config)
        self.embeddings = nn.Embedding(config.vocab_size, config.d_model)
        self.blocks = nn.ModuleList(
            SPUBlock(config.d_model, **config.block_kwargs()) for _ in range(config.n_layers)
        )
        self.norm = nn.LayerNorm(config.d_model)
        self.post_init()

    def get_input_embeddings(self) -> nn.Module:
        return self.embeddings

    def set_input_embeddings(self, value: nn.Module) -> None:
        if not isinstance(value, nn.Embedding):
            raise TypeError(f"input embeddings must be an nn.Embedding, got {type(value).__name__}")
        self.embeddings = value

    def strand(
        self,
        input_ids: torch.Tensor | None,
        one_hot: torch.Tensor | None,
        mask: torch.Tensor | None,
        output_hidden_states: bool = False,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
        """One pass over one strand: ``(last hidden, all hidden states, saliency maps)``."""
        if one_hot is not None:
            x = one_hot.to(self.embeddings.weight.dtype) @ self.embeddings.weight[_ONE_HOT_IDS]
        else:
            x = self.embeddings(input_ids)
        hidden, saliency = [x], []
        for block in self.blocks:
            x, alpha = block(x, mask)
            hidden.append(x)
            if alpha is not None:
                saliency.append(alpha)
        x = self.norm(x)
        return x, tuple(hidden) if output_hidden_states else (), tuple(saliency)

    def both_strands(
        self,
        input_ids: torch.Tensor | None,
        one_hot: torch.Tensor | None,
        mask: torch.Tensor | None,
        output_hidden_states: bool = False,
    ) -> list[
        tuple[torch.Tensor, tuple[torch.Tensor, ...], tuple[torch.Tensor, ...], torch.Tensor | None]
    ]:
        """The forward strand, and with ``rc_equivariant`` its reverse complement (in its own,
        reversed orientation): a list of ``(last hidden, hidden states, saliency, mask)``."""
        check_inputs(self.config, input_ids, one_hot, mask)
        passes = [(*self.strand(input_ids, one_hot, mask, output_hidden_states), mask)]
        if self.config.rc_equivariant:
            rc_ids = None if input_ids is None else reverse_complement_ids(input_ids)
            # A C G T -> T G C A is the channel order reversed.
            rc_hot = None if one_hot is None else one_hot.flip(1).flip(2)
            rc_mask = None if mask is None else mask.flip(1)
            passes.append((*self.strand(rc_ids, rc_hot, rc_mask, output_hidden_states), rc_mask))
        return passes

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        one_hot: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs: object,
    ) -> SPUModelOutput:
        passes = self.both_strands(input_ids, one_hot, attention_mask, bool(output_hidden_states))
        last, hidden, saliency, _ = passes[0]
        if len(passes) == 2:
            # Averaged with the reverse strand read back in forward orientation: h(rc x) = flip h(x).
            rc_last, _, rc_saliency, _ = passes[1]
            last = (last + rc_last.flip(1)) / 2
            saliency = tuple(
                (a + b.flip(1)) / 2 for a, b in zip(saliency, rc_saliency, strict=True)
            )
        return SPUModelOutput(
            last_hidden_state=last, hidden_states=hidden or None, saliency=saliency or None
        )


def _pool(
    config: SPUConfig,
    hidden: torch.Tensor,
    saliency: tuple[torch.Tensor, ...],
    mask: torch.Tensor | None,
) -> torch.Tensor:
    if config.pooling == "saliency":
        weights = saliency[-1] if mask is None else saliency[-1] * mask.to(hidden.dtype)
        weights = weights / weights.sum(dim=1, keepdim=True).clamp_min(1e-12)
        return (hidden * weights.unsqueeze(-1)).sum(dim=1)
    return masked_mean(hidden, mask)


def _merge_saliency(passes: list) -> Saliency:
    saliency = passes[0][2]
    if len(passes) == 2:
        saliency = tuple((a + b.flip(1)) / 2 for a, b in zip(saliency, passes[1][2], strict=True))
    return saliency or None


def _check_class_labels(labels: torch.Tensor, num_labels: int) -> None:
    """Raise unless every label is a class index in ``[0, num_labels)`` (or -100, ignored)."""
    bad = labels[((labels < 0) | (labels >= num_labels)) & (labels != -100)]
    if bad.numel():
        raise ValueError(
            f"labels must be class indices in [0, {num_labels}) (or -100 to ignore), got "
            f"{sorted(set(bad.unique().tolist()))}"
        )


class SPUForSequenceClassification(SPUPreTrainedModel):
    """Pooled SPU features and a linear head; ``num_labels == 1`` regresses (MSE), else cross-entropy."""

    def __init__(self, config: SPUConfig) -> None:
        super().__init__(config)
        if not config.num_labels:
            raise ValueError(f"num_labels must be >= 1, got {config.num_labels}")
        self.num_labels = config.num_labels
        self.spu = SPUModel(config)
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(config.d_model, config.num_labels)
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        one_hot: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs: object,
    ) -> SPUSequenceClassifierOutput:
        passes = self.spu.both_strands(
            input_ids, one_hot, attention_mask, bool(output_hidden_states)
        )
        # Each strand is pooled in its own orientation and the logits averaged: a sequence and its
        # reverse complement then sum the same two terms, so their logits agree exactly.
        logits = [
            self.classifier(self.dropout(_pool(self.config, h, sal, m))) for h, _, sal, m in passes
        ]
        logit = logits[0] if len(logits) == 1 else (logits[0] + logits[1]) / 2
        loss = None
        if labels is not None:
            if self.num_labels == 1:
                loss = nn.functional.mse_loss(logit.squeeze(-1), labels.to(logit.dtype))
            else:
                _check_class_labels(labels, self.num_labels)
                loss = nn.functional.cross_entropy(logit, labels)
        return SPUSequenceClassifierOutput(
            loss=loss,
            logits=logit,
            hidden_states=passes[0][1] or None,
            saliency=_merge_saliency(passes),
        )


class SPUForMaskedLM(SPUPreTrainedModel):
    """A token head over SPU features for masked-language-model pre-training (labels -100 ignored)."""

    def __init__(self, config: SPUConfig) -> None:
        super().__init__(config)
        self.spu = SPUModel(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size)
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        one_hot: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs: object,
    ) -> SPUMaskedLMOutput:
        passes = self.spu.both_strands(
            input_ids, one_hot, attention_mask, bool(output_hidden_states)
        )
        logits = self.lm_head(passes[0][0])
        if len(passes) == 2:
            # The reverse strand predicts complement bases in reversed order: map both back.
            comp = complement_permutation().to(logits.device)
            if self.config.vocab_size > len(comp):  # rows past the DNA vocabulary map to themselves
                comp = torch.cat(
                    [comp, torch.arange(len(comp), self.config.vocab_size, device=comp.device)]
                )
            rc_logits = self.lm_head(passes[1][0]).flip(1)[..., comp]
            logits = (logits + rc_logits) / 2
        loss = None
        if labels is not None:
            loss = nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100
            )
        return SPUMaskedLMOutput(
            loss=loss,
            logits=logits,
            hidden_states=passes[0][1] or None,
            saliency=_merge_saliency(passes),
        )


AutoConfig.register("spu", SPUConfig, exist_ok=True)
AutoModel.register(SPUConfig, SPUModel, exist_ok=True)
AutoModelForSequenceClassification.register(SPUConfig, SPUForSequenceClassification, exist_ok=True)
AutoModelForMaskedLM.register(SPUConfig, SPUForMaskedLM, exist_ok=True)
AutoTokenizer.register(SPUConfig, slow_tokenizer_class=DNATokenizer, exist_ok=True)
