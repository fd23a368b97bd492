"""CARS inside ``model.generate``: a logits processor that keeps one trie per prompt across calls.

Each ``generate`` call is one attempt per row. The processor turns the model's scores at prefix u
into ``log(p_u ⊙ θ_u)`` (or the raw ``log p_u`` at a node created in this attempt, as in
:class:`~cars_sampling.CARSSampler`). When the token ``generate`` sampled turns out invalid, the
processor learns from it and forces EOS on that row, so ``generate`` ends cleanly instead of
raising; :meth:`CARSLogitsProcessor.finish` says which rows were valid.

A trie is only valid for one (prompt, temperature, constraint, LM). The processor fingerprints the
prompt ids of every row, its temperature and the constraint, and checks the root log-probs the
model gives against the stored ones (a swapped or retrained LM), starting a new trie when any
differs. A batch gets one trie per row (two rows with the same prompt get two tries: attempts that
run at the same time must not share one, or the proposal would stop telescoping).

The processor is a drop-in ``logits_processor`` for ``model.generate``: a call whose ``input_ids``
do not continue the previous call's (a new ``generate``) closes the previous attempt by itself, so a
forgotten :meth:`~CARSLogitsProcessor.finish` cannot bias the samples (every attempt counts, and the
nodes it created stop being new). ``finish`` is still what reports validity and learns from the
last sampled token, which the processor never sees. Without :meth:`~CARSLogitsProcessor.begin` the
first call's ``input_ids`` are the prompt (a padded row is then keyed by its padded ids).

``generate`` must sample from the processed scores unchanged: :func:`generate_kwargs` resets every
option that would change them (temperature, top-k/p, min-p, repetition penalties, ...), and
:meth:`CARSLogitsProcessor.generate` refuses such options when they are passed.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

from cars_sampling.constraints import Constraint, fingerprint_of
from cars_sampling.sampler import STYLES, Style, check_logprobs
from cars_sampling.tempering import check_sampling_args, transform_logprobs
from cars_sampling.trie import Node, Trie

# generate() options that change the sampled distribution, with the value that leaves it alone.
NEUTRAL_GENERATE_OPTIONS: dict[str, Any] = {
    "temperature": 1.0,
    "top_k": 0,
    "top_p": 1.0,
    "min_p": None,
    "typical_p": 1.0,
    "epsilon_cutoff": 0.0,
    "eta_cutoff": 0.0,
    "repetition_penalty": 1.0,
    "encoder_repetition_penalty": 1.0,
    "no_repeat_ngram_size": 0,
    "bad_words_ids": None,
    "sequence_bias": None,
    "suppress_tokens": None,
    "begin_suppress_tokens": None,
    "min_new_tokens": None,
    "min_length": 0,
    "num_beams": 1,
    "guidance_scale": None,
}


# Options generate_kwargs does not set (not every transformers version knows them) but that change
# the distribution when passed: refused unless given their neutral value.
REFUSED_GENERATE_OPTIONS: dict[str, Any] = {
    "forced_eos_token_id": None,
    "forced_bos_token_id": None,
    "exponential_decay_length_penalty": None,
    "watermarking_config": None,
    "num_beam_groups": 1,
    "diversity_penalty": 0.0,
    "penalty_alpha": None,
}
# Other values that leave the distribution alone (``top_k=None`` is transformers' own "no top-k").
_ALSO_NEUTRAL: dict[str, Any] = {"top_k": None}


def generate_kwargs(
    max_new_tokens: int, eos_token_ids: Sequence[int] | frozenset[int]
) -> dict[str, Any]:
    """``generate`` arguments that sample exactly from the processed scores.

    Every distribution-changing option is set to its neutral value, overriding what a model's
    ``generation_config`` may set (e.g. a shipped ``repetition_penalty=1.1``).
    """
    eos = sorted(eos_token_ids)
    return {
        **NEUTRAL_GENERATE_OPTIONS,
        "do_sample": True,
        "max_new_tokens": max_new_tokens,
        "eos_token_id": eos,
        "pad_token_id": eos[0],
    }


def check_generate_options(options: dict[str, Any]) -> None:
    """Raise ``ValueError`` for any ``generate`` option that would break exactness."""
    neutral = {**NEUTRAL_GENERATE_OPTIONS, **REFUSED_GENERATE_OPTIONS}
    bad = {
        k: v
        for k, v in options.items()
        if k in neutral and v != neutral[k] and not (k in _ALSO_NEUTRAL and v == _ALSO_NEUTRAL[k])
    }
    if options.get("do_sample") is False:
        bad["do_sample"] = False
    if bad:
        raise ValueError(
            f"generate options {bad} change the distribution generate samples from, so the "
            "samples would not be exact; give the temperature to CARSLogitsProcessor and leave "
            f"these at { ({k: neutral.get(k, True) for k in bad}) }"
        )


def _fork(constraint: Constraint) -> Constraint:
    """An independent copy of a constraint's state machine (one per batch row)."""
    fork = getattr(constraint, "fork", None)
    return fork() if callable(fork) else copy.deepcopy(constraint)


@dataclasses.dataclass
class _Run:
    """The trie of one (prompt, temperature, constraint, row slot) and its counters."""

    trie: Trie
    attempts: int = 0
    accepted: int = 0


@dataclasses.dataclass
class _Row:
    """One row's current attempt."""

    run: _Run
    constraint: Constraint
    nodes: list[Node] = dataclasses.field(default_factory=list)
    tokens: list[int] = dataclasses.field(default_factory=list)
    status: str = "running"  # "running", "accepted" or "failed"
    pending: bool = False  # new cones were added: propagate even if the attempt is accepted


class CARSLogitsProcessor:
    """A ``transformers`` logits processor running CARS (or ARS/RSFT/RS) across ``generate`` calls.

    ``lm_atol`` is the largest difference (nats) between the root log-probs ``generate`` gives and
    the stored ones before the LM counts as changed (bf16 kernels are not bit-reproducible).
    """

    def __init__(
        self,
        constraint: Constraint,
        *,
        style: Style = "cars",
        temperature: float = 1.0,
        sparse_trie: bool = True,
        max_trie_bytes: int | None = None,
        lm_atol: float = 1e-2,
    ) -> None:
        if style not in STYLES:
            raise ValueError(f"style must be one of {STYLES}, got {style!r}")
        check_sampling_args(temperature, None, None, False)
        self.constraint = constraint
        self.style = style
        self.temperature = float(temperature)
        self.sparse_trie = sparse_trie
        self.max_trie_bytes = max_trie_bytes
        self.lm_atol = float(lm_atol)
        self._runs: dict[tuple[Any, ...], _Run] = {}
        self._rows: list[_Row] | None = None
        self._prompt_len: int | None = None
        self._prompts: list[tuple[int, ...]] | None = None
        self._masks: list[tuple[int, ...]] | None = None
        self._last: _Run | None = None
        self._seen: list[list[int]] | None = None  # the current attempt's last input_ids

    # -- runs ----------------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget every trie."""
        self._runs.clear()
        self._last = None

    @property
    def trie(self) -> Trie:
        """The trie of the most recent attempt's first row (a fresh one before any attempt)."""
        if self._last is None:
            return Trie(sparse=self.sparse_trie, max_bytes=self.max_trie_bytes)
        return self._last.trie

    @property
    def attempts(self) -> int:
        return sum(r.attempts for r in self._runs.values())

    @property
    def accepted(self) -> int:
        return sum(r.accepted for r in self._runs.values())

    @property
    def n_tries(self) -> int:
        return len(self._runs)

    def begin(
        self,
        prompt: int | torch.Tensor | Sequence[int] | Sequence[Sequence[int]],
        attention_mask: torch.Tensor | Sequence[Sequence[int]] | None = None,
    ) -> None:
        """Start an attempt (optional: call before each ``generate``).

        An attempt still open (``finish`` not called) is closed first, as :meth:`__call__` does.

        ``prompt`` is the ``input_ids`` given to ``generate`` (``[batch, length]`` or one row), or
        just their length: the prompt ids are then read from the first call's ``input_ids``.
        A padded batch must be padded on the left and come with its ``attention_mask`` (give the
        same mask to ``generate``): each row's trie is keyed by its unpadded ids, and a model fed
        right padding would condition on the pad tokens, so right padding is refused.
        """
        self._close_unfinished()
        if isinstance(prompt, int):
            self._prompt_len, self._prompts = int(prompt), None
        else:
            rows: list[Any] = prompt.tolist() if isinstance(prompt, torch.Tensor) else list(prompt)
            if rows and not isinstance(rows[0], (list, tuple)):
                rows = [rows]
            self._prompts = [tuple(int(t) for t in r) for r in rows]
            lengths = {len(r) for r in self._prompts}
            if len(lengths) != 1:
                raise ValueError(f"rows of a batch must have one (padded) length, got {lengths}")
            self._prompt_len = lengths.pop()
        self._masks = None if attention_mask is None else _left_padding(attention_mask)
        if self._masks is not None and self._prompts is not None:
            shape = (len(self._prompts), self._prompt_len)
            if (len(self._masks), len(self._masks[0])) != shape:
                raise ValueError(f"attention_mask must have the prompt's shape {shape}")
        self._rows = None

    @property
    def attempt_failed(self) -> bool:
        """Whether the first row's attempt already sampled an invalid token (EOS is forced)."""
        return bool(self._rows) and self._rows[0].status == "failed"  # type: ignore[index]

    def _logp(self, scores: torch.Tensor, prefix: Sequence[int]) -> torch.Tensor:
        raw = scores.detach().float().cpu()
        check_logprobs(raw, prefix)  # log_softmax would turn +inf into NaN
        logp = torch.log_softmax(raw, -1)
        logp = transform_logprobs(logp, self.temperature)
        check_logprobs(logp, prefix)
        return logp

    def _new_run(self) -> _Run:
        trie = Trie(sparse=self.sparse_trie, max_bytes=self.max_trie_bytes)
        return _Run(trie)

    def _open_rows(self, input_ids: torch.Tensor, scores: torch.Tensor) -> list[_Row]:
        """Find (or start) every row's trie from its prompt fingerprint and its root log-probs."""
        assert self._prompt_len is not None
        prompts = [tuple(r[: self._prompt_len]) for r in input_ids.tolist()]
        if self._prompts is not None and prompts != self._prompts:
            raise ValueError("generate's input_ids differ from the prompt given to begin()")
        if self._masks is not None:  # key each row by its unpadded ids
            if len(self._masks) != len(prompts) or len(self._masks[0]) != self._prompt_len:
                raise ValueError("attention_mask does not have the shape of the prompt ids")
            prompts = [
                tuple(t for t, m in zip(ids, mask, strict=True) if m)
                for ids, mask in zip(prompts, self._masks, strict=True)
            ]
        fp, seen, rows = fingerprint_of(self.constraint), dict[tuple[int, ...], int](), []
        for b, ids in enumerate(prompts):
            slot = seen.get(ids, 0)
            seen[ids] = slot + 1
            key = (ids, self.temperature, fp, self.style, slot)
            run = self._runs.get(key)
            logp = self._logp(scores[b], [])
            if run is not None and run.trie.root is not None and not self._same_lm(run, logp):
                run = None  # the model changed under the same prompt: the trie is stale
            if run is None:
                run = self._runs[key] = self._new_run()
            constraint = self.constraint if b == 0 else _fork(self.constraint)
            constraint.reset()
            row = _Row(run, constraint)
            root = run.trie.root
            if root is None:
                root = run.trie.set_root(logp, born=run.attempts)
                if self.style in ("cars", "rsft"):
                    run.trie.apply_cone(root, constraint.allowed_mask())
            row.nodes.append(root)
            rows.append(row)
        self._last = rows[0].run
        return rows

    def _same_lm(self, run: _Run, logp: torch.Tensor) -> bool:
        assert run.trie.root is not None
        stored = run.trie.root.logp
        live = torch.isfinite(stored) | torch.isfinite(logp)
        if not bool((torch.isfinite(stored) == torch.isfinite(logp)).all()):
            return False
        return bool((stored[live] - logp[live]).abs().max() <= self.lm_atol) if live.any() else True

    def _learn_invalid(self, row: _Row, node: Node, token: int) -> None:
        row.status = "failed"
        if self.style in ("ars", "cars"):
            row.run.trie.set_theta(node, token, 0.0)
            row.run.trie.propagate(row.nodes, row.tokens)

    def _accept(self, row: _Row) -> None:
        row.status = "accepted"
        if row.pending:
            row.run.trie.propagate(row.nodes, row.tokens)

    def _consume(self, row: _Row, tok: int, logp: torch.Tensor | None) -> None:
        """Advance a running row by the token ``generate`` sampled (``logp``: the next scores)."""
        node = row.nodes[-1]
        if not row.constraint.advance(tok):
            self._learn_invalid(row, node, tok)
        elif tok in row.constraint.eos_token_ids:
            self._accept(row)
        elif logp is None:  # cut by max_new_tokens
            if row.constraint.is_accepting():
                self._accept(row)
            else:
                self._learn_invalid(row, node, tok)
        else:
            row.tokens.append(tok)
            child = node.children.get(tok)
            if child is None:
                child = row.run.trie.add_child(node, tok, logp, born=row.run.attempts)
            row.nodes.append(child)

    def _scores(self, row: _Row) -> torch.Tensor:
        trie, node = row.run.trie, row.nodes[-1]
        fresh = node.born == row.run.attempts and len(row.nodes) > 1
        if self.style == "cars" and fresh:
            trie.apply_cone(node, row.constraint.allowed_mask())
            row.pending = True
            return torch.log(trie.weights(node, theta=False))
        if self.style == "rs" or (self.style == "rsft" and len(row.nodes) > 1):
            return torch.log(trie.weights(node, theta=False))
        return torch.log(trie.weights(node))

    def _continues(self, ids: list[list[int]]) -> bool:
        """Whether ``ids`` extend the current attempt's last ``input_ids`` by one token per row."""
        seen = self._seen
        if seen is None or not ids or len(ids[0]) != len(seen[0]) + 1:
            return False
        if len(ids) != len(seen):
            raise ValueError(
                f"the batch changed size during generate ({len(seen)} -> {len(ids)}); beam "
                "search and other row-reordering modes are unsupported"
            )
        return all(row[:-1] == old for row, old in zip(ids, seen, strict=True))

    def _close_unfinished(self) -> None:
        """Close an attempt ``finish`` was not called for: it counts, and learns nothing more.

        The token ``generate`` sampled last is unknown here, so nothing is learnt from it (a
        looser θ, still an upper bound, keeps the proposal exact); the cones added during the
        attempt are propagated, as an accepted attempt would.
        """
        if self._rows is not None:
            for row in self._rows:
                if row.status == "running" and row.pending:
                    row.run.trie.propagate(row.nodes, row.tokens)
            self._count(self._rows)
        self._prompt_len, self._rows, self._seen = None, None, None

    @staticmethod
    def _count(rows: list[_Row]) -> None:
        for row in rows:
            row.run.attempts += 1
            row.run.accepted += row.status == "accepted"

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if scores.shape[-1] != self.constraint.vocab_size:
            raise ValueError(
                f"vocabulary mismatch: scores have {scores.shape[-1]} entries, the constraint "
                f"covers {self.constraint.vocab_size} token ids"
            )
        ids = input_ids.tolist()
        if self._rows is not None and not self._continues(ids):
            self._close_unfinished()  # a new generate() without finish(): close the last attempt
        if self._rows is None:
            if self._prompt_len is None:  # no begin(): this call's input_ids are the prompt
                self._prompt_len, self._prompts, self._masks = input_ids.shape[1], None, None
            self._rows = self._open_rows(input_ids, scores)
        else:
            for b, row in enumerate(self._rows):
                if row.status == "running":
                    tok = int(input_ids[b, -1])
                    self._consume(row, tok, self._logp(scores[b], [*row.tokens, tok]))
        out = torch.full(scores.shape, -torch.inf, dtype=torch.float32)
        for b, row in enumerate(self._rows):
            if row.status == "running":
                out[b] = self._scores(row).float()
            else:  # end this row cleanly: only EOS remains
                out[b, sorted(row.constraint.eos_token_ids)[0]] = 0.0
        self._seen = ids
        return out.to(scores.dtype).to(scores.device)

    def finish(self, sequences: torch.Tensor | Sequence[int] | Sequence[Sequence[int]]) -> Any:
        """Close the attempt that produced ``sequences`` (prompt included).

        Returns ``True``/``False`` (valid or not) for a single row, a list of them for a batch.
        """
        if self._prompt_len is None:
            raise RuntimeError(
                "finish() without an open attempt (no generate call since the last finish)"
            )
        ids = sequences.tolist() if isinstance(sequences, torch.Tensor) else list(sequences)
        rows_ids = [ids] if not ids or not isinstance(ids[0], (list, tuple)) else ids
        rows = self._rows or []
        if len(rows_ids) != len(rows):
            raise ValueError(f"finish() got {len(rows_ids)} rows, generate ran {len(rows)}")
        for row, seq in zip(rows, rows_ids, strict=True):
            generated = list(seq[self._prompt_len :])
            if row.status == "running":
                if len(generated) == len(row.tokens) + 1:
                    self._consume(row, int(generated[-1]), None)
                else:  # generate stopped without a last token for this row
                    row.status = "failed"
        self._count(rows)
        self._prompt_len, self._rows, self._seen = None, None, None
        valid = [row.status == "accepted" for row in rows]
        return valid[0] if len(valid) == 1 else valid

    def generate(
        self,
        model: Any,
        input_ids: torch.Tensor,
        *,
        max_new_tokens: int,
        attention_mask: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, list[bool]]:
        """One attempt per row: ``model.generate`` with this processor; returns (output, valid).

        A padded batch needs left padding and its ``attention_mask``
        (``tokenizer.padding_side = "left"``); without a mask, a row that starts or ends with the
        pad token is refused, since the model would condition on the pads.
        """
        check_generate_options(kwargs)
        options = {**generate_kwargs(max_new_tokens, self.constraint.eos_token_ids), **kwargs}
        if attention_mask is None:
            _refuse_unmasked_padding(input_ids, _pad_ids(model, options))
        else:
            options["attention_mask"] = attention_mask
        self.begin(input_ids, attention_mask)
        try:
            out = model.generate(input_ids, logits_processor=[self], **options)
        except BaseException:
            self._close_unfinished()  # the attempt still counts: its new nodes must age
            raise
        valid = self.finish(out)
        return out, valid if isinstance(valid, list) else [valid]


def _left_padding(attention_mask: torch.Tensor | Sequence[Sequence[int]]) -> list[tuple[int, ...]]:
    """The mask's rows, checked to be left padding (zeros, then ones, ending in a one)."""
    rows = attention_mask.tolist() if isinstance(attention_mask, torch.Tensor) else attention_mask
    rows = [rows] if rows and not isinstance(rows[0], (list, tuple)) else rows
    out = [tuple(int(m) for m in r) for r in rows]
    for b, r in enumerate(out):
        if not r or any(m not in (0, 1) for m in r) or list(r) != sorted(r) or r[-1] != 1:
            raise ValueError(
                f"attention_mask row {b} is {list(r)[:20]}: only left padding is supported (zeros "
                "then ones); set tokenizer.padding_side = 'left', since with right padding the "
                "model would sample after the pad tokens"
            )
    return out


def _pad_ids(model: Any, options: dict[str, Any]) -> set[int]:
    config = getattr(model, "generation_config", None)
    ids = {options.get("pad_token_id"), getattr(config, "pad_token_id", None)}
    return {int(t) for t in ids if isinstance(t, int)}


def _refuse_unmasked_padding(input_ids: torch.Tensor, pad_ids: set[int]) -> None:
    ids = input_ids.tolist() if input_ids.dim() == 2 else [input_ids.tolist()]
    for b, row in enumerate(ids):
        if row and (row[0] in pad_ids or row[-1] in pad_ids):
            raise ValueError(
                f"input_ids row {b} starts or ends with a pad token id ({sorted(pad_ids)}) and no "
                "attention_mask was given: the model would condition on the pads; pad on the left "
                "(tokenizer.padding_side = 'left') and pass attention_mask=..."
            )
