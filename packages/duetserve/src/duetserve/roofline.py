"""DuetServe's attention-aware roofline: predicted iteration latency of a batch on ``n`` SMs.

Operators fall into three groups (paper section 3, as reconstructed in the spec):

* token-level (QKV/O projections, the SwiGLU MLP, norms and activations, the LM head): cost depends
  only on the number of scheduled tokens N. A linear layer ``in x out`` costs ``2 N in out`` FLOPs and
  ``in out b_w + N (in + out) b_a`` bytes;
* sequence-level (attention): a request with ``q`` new tokens on ``c`` cached ones costs
  ``4 h d_h q (c + (q + 1) / 2)`` FLOPs (causal) and reads ``(c + q) 2 h_kv d_h b_kv`` KV bytes plus
  ``q (h + 2 h_kv) d_h b_a`` activation bytes. Token budgets ignore this term, hence "attention-aware";
* communication (tensor parallelism): two all-reduces per layer of ``2 (tp - 1) / tp N d b_a`` bytes
  over the interconnect.

Each compute operator takes ``max(FLOPs / Π(n), bytes / B(n))`` on ``n`` SMs; the iteration is their
sum plus the all-reduces and a constant launch overhead. Every quantity is a sum over requests of
``q``, ``q (c + (q + 1) / 2)`` and ``c + q``, so a batch is priced from a :class:`BatchStats` of a few
sums, and a whole vector of candidate SM counts at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any, Literal, overload

import numpy as np

from duetserve.hardware import HardwareProfile
from duetserve.shapes import ModelShape


@dataclasses.dataclass(frozen=True, slots=True)
class Seq:
    """One request in a batch: ``new_tokens`` scheduled this iteration on top of ``context`` cached
    tokens. A decode has ``new_tokens == 1``; a prefill chunk more."""

    context: int
    new_tokens: int = 1

    def __post_init__(self) -> None:
        c, q = self.context, self.new_tokens
        if (
            type(c) is not int  # the common case first: plain ints, checked cheaply
            and (isinstance(c, bool) or not isinstance(c, np.integer))
        ) or (type(q) is not int and (isinstance(q, bool) or not isinstance(q, np.integer))):
            raise ValueError(
                f"a Seq needs integer context and new_tokens, got context={c!r}, new_tokens={q!r}"
            )
        if c < 0 or q < 1:
            raise ValueError(
                f"a Seq needs context >= 0 and new_tokens >= 1, got context={c}, new_tokens={q}"
            )


@dataclasses.dataclass(frozen=True, slots=True)
class BatchStats:
    """The sums the roofline needs, for the decode part (``q == 1``) and the prefill part of a batch.

    ``*_qc`` is ``sum q (c + (q + 1) / 2)`` (attention score work), ``*_kv`` is ``sum (c + q)`` (KV
    tokens read).
    """

    decode_seqs: int = 0
    decode_kv: float = 0.0
    prefill_seqs: int = 0
    prefill_tokens: int = 0
    prefill_qc: float = 0.0
    prefill_kv: float = 0.0

    @classmethod
    def of(cls, batch: Iterable[Seq]) -> BatchStats:
        # Runs on every iteration over every decode: the decode branch does the least it can.
        d_n = d_ctx = p_n = p_tok = p_kv = 0
        p_qc = 0.0
        try:
            for s in batch:
                if s.new_tokens == 1:
                    d_n += 1
                    d_ctx += s.context
                else:
                    c, q = s.context, s.new_tokens
                    p_n += 1
                    p_tok += q
                    p_qc += q * (c + (q + 1) / 2)
                    p_kv += c + q
        except AttributeError:  # free when nothing is raised: the hot loop stays as it is
            bad = next(x for x in batch if not isinstance(x, Seq))
            raise ValueError(
                f"a batch holds Seq(context, new_tokens) items, got {type(bad).__name__} {bad!r}"
            ) from None
        return cls(d_n, float(d_ctx + d_n), p_n, p_tok, p_qc, float(p_kv))

    def __add__(self, other: BatchStats) -> BatchStats:
        return BatchStats(
            self.decode_seqs + other.decode_seqs,
            self.decode_kv + other.decode_kv,
            self.prefill_seqs + other.prefill_seqs,
            self.prefill_tokens + other.prefill_tokens,
            self.prefill_qc + other.prefill_qc,
            self.prefill_kv + other.prefill_kv,
        )

    @property
    def tokens(self) -> int:
        return self.decode_seqs + self.prefill_tokens

    @property
    def seqs(self) -> int:
        return self.decode_seqs + self.prefill_seqs


Batch = Sequence[Seq] | BatchStats
OPS = (
    "qkv_proj",
    "o_proj",
    "mlp_up",
    "mlp_down",
    "elementwise",
    "attn_decode",
    "attn_prefill",
    "lm_head",
)


@dataclasses.dataclass(frozen=True)
class LatencyBreakdown:
    """Predicted seconds per operator group (all layers), their FLOPs and bytes, and which roof bounds
    each (``"compute"`` or ``"memory"``); ``allreduce`` and ``overhead`` take no SMs."""

    total: float
    seconds: dict[str, float]
    flops: dict[str, float]
    bytes: dict[str, float]
    bound: dict[str, str]
    n_sm: int


class RooflineModel:
    """Predict iteration latency for a model shape on a hardware profile.

    >>> model = RooflineModel(ModelShape.qwen3_8b(), HardwareProfile.h100_sxm_spec())
    >>> model.iteration_latency([Seq(context=1024)] * 32) < model.iteration_latency([Seq(0, 2048)])
    True
    """

    def __init__(self, shape: ModelShape, hw: HardwareProfile) -> None:
        if shape.tp > 1 and hw.link_bw <= 0:
            raise ValueError(f"tp={shape.tp} needs an interconnect: hw.link_bw must be > 0")
        self.shape = shape
        self.hw = hw
        self._flops_matrix, self._bytes_matrix = _cost_matrices(shape)
        s = shape
        # Two ring all-reduces of N d activations per layer; none without tensor parallelism.
        self._comm_per_token = (
            2 * s.n_layers * 2 * (s.tp - 1) / s.tp * s.d_model * s.bytes_act / hw.link_bw
            if s.tp > 1
            else 0.0
        )

    def __repr__(self) -> str:
        return f"RooflineModel({self.shape.name}, tp={self.shape.tp}, {self.hw.name})"

    # ---- the operator table -----------------------------------------------------------------
    def cost_matrices(self) -> tuple[np.ndarray, np.ndarray]:
        """The FLOPs and bytes of each operator (rows, :data:`OPS`) as linear maps of a batch's
        :func:`features` (columns, :data:`FEATURES`); all layers."""
        return self._flops_matrix, self._bytes_matrix

    def op_costs(self, stats: BatchStats) -> tuple[np.ndarray, np.ndarray]:
        """FLOPs and bytes of each operator group in :data:`OPS`, summed over all layers."""
        f = features(stats)
        return self._flops_matrix @ f, self._bytes_matrix @ f

    @property
    def fixed_seconds_per_token(self) -> float:
        """The TP all-reduce seconds each scheduled token adds, whatever the SM count."""
        return self._comm_per_token

    def fixed_seconds(self, stats: BatchStats) -> float:
        """The part that no SM count changes: the TP all-reduces and the launch overhead."""
        if stats.tokens == 0:
            return 0.0
        return self._comm_per_token * stats.tokens + self.hw.launch_overhead_s

    # ---- predictions ------------------------------------------------------------------------
    def latency_rows(
        self, rows: np.ndarray, inv_flops: np.ndarray, inv_bw: np.ndarray
    ) -> np.ndarray:
        """Seconds for each batch (rows of :func:`features`, shape ``(m, F)``) on each SM count given
        by its reciprocal curves (shape ``(c,)``): an ``(m, c)`` array. The vectorised core."""
        flops = rows @ self._flops_matrix.T  # (m, ops)
        nbytes = rows @ self._bytes_matrix.T
        per_op = np.maximum(flops[:, :, None] * inv_flops, nbytes[:, :, None] * inv_bw)
        tokens = rows[:, 1]
        fixed = self._comm_per_token * tokens + self.hw.launch_overhead_s * rows[:, 0]
        return per_op.sum(axis=1) + fixed[:, None]

    def inverse_curves(self, n_sm: Any) -> tuple[np.ndarray, np.ndarray]:
        """``1 / Π(n)`` and ``1 / B(n)`` for the SM counts ``n_sm`` (validated, all > 0)."""
        n = np.atleast_1d(np.asarray(n_sm))
        if n.size == 0 or np.any(n <= 0):
            raise ValueError(f"SM counts must be > 0, got {n_sm!r}")
        return 1.0 / self.hw.flops_curve(n), 1.0 / self.hw.bw_curve(n)

    def latency_curve(self, batch: Batch, n_sm: Any) -> np.ndarray:
        """Predicted seconds of ``batch`` for every SM count in the integer array ``n_sm``."""
        inv_flops, inv_bw = self.inverse_curves(n_sm)
        return self.latency_rows(features(_stats(batch))[None, :], inv_flops, inv_bw)[0]

    @overload
    def iteration_latency(
        self, batch: Batch, n_sm: int | None = None, breakdown: Literal[False] = False
    ) -> float: ...

    @overload
    def iteration_latency(
        self, batch: Batch, n_sm: int | None = None, *, breakdown: Literal[True]
    ) -> LatencyBreakdown: ...

    def iteration_latency(
        self, batch: Batch, n_sm: int | None = None, breakdown: bool = False
    ) -> float | LatencyBreakdown:
        """Predicted seconds of one iteration of ``batch`` on ``n_sm`` SMs (default: all)."""
        n = self.hw.n_sm if n_sm is None else n_sm
        if isinstance(n, bool) or int(n) != n or not 0 < n <= self.hw.n_sm:
            raise ValueError(f"n_sm must be an integer in (0, {self.hw.n_sm}], got {n_sm!r}")
        n = int(n)
        stats = _stats(batch)
        if not breakdown:
            return float(self.latency_curve(stats, n)[0])
        flops, nbytes = self.op_costs(stats)
        pi, bw = float(self.hw.flops_curve(n)), float(self.hw.bw_curve(n))
        t_compute, t_memory = flops / pi, nbytes / bw
        seconds = {
            op: float(max(tc, tm)) for op, tc, tm in zip(OPS, t_compute, t_memory, strict=True)
        }
        fixed = self.fixed_seconds(stats)
        overhead = self.hw.launch_overhead_s if stats.tokens else 0.0
        seconds["allreduce"] = fixed - overhead
        seconds["overhead"] = overhead
        return LatencyBreakdown(
            total=float(sum(seconds.values())),
            seconds=seconds,
            flops=dict(zip(OPS, flops.tolist(), strict=True)),
            bytes=dict(zip(OPS, nbytes.tolist(), strict=True)),
            bound={
                op: "compute" if tc >= tm else "memory"
                for op, tc, tm in zip(OPS, t_compute, t_memory, strict=True)
            },
            n_sm=n,
        )


# Columns of :func:`features`: whether the batch has tokens (weights are read once), tokens, decode KV
# length (= decode attention work), decodes, prefill attention work, prefill tokens, prefill KV length,
# sequences (LM-head rows).
FEATURES = (
    "has_tokens",
    "tokens",
    "decode_kv",
    "decode_seqs",
    "prefill_qc",
    "prefill_tokens",
    "prefill_kv",
    "seqs",
)


def features(stats: BatchStats) -> np.ndarray:
    """The batch as the vector every operator's FLOPs and bytes are linear in (see FEATURES)."""
    return feature_rows(stats)[0]


def feature_rows(*stats: BatchStats) -> np.ndarray:
    """The :func:`features` of several batches as the rows of one ``(len(stats), F)`` array."""
    return np.array(
        [
            [
                1.0 if s.tokens else 0.0,
                s.tokens,
                s.decode_kv,
                s.decode_seqs,
                s.prefill_qc,
                s.prefill_tokens,
                s.prefill_kv,
                s.seqs,
            ]
            for s in stats
        ],
        dtype=np.float64,
    )


def _cost_matrices(s: ModelShape) -> tuple[np.ndarray, np.ndarray]:
    """FLOPs and bytes of each operator in OPS as linear maps of the FEATURES vector (all layers)."""
    col = {name: i for i, name in enumerate(FEATURES)}
    mf = np.zeros((len(OPS), len(FEATURES)))
    mb = np.zeros((len(OPS), len(FEATURES)))
    bw, ba, bkv, layers = s.bytes_w, s.bytes_act, s.bytes_kv, s.n_layers
    h, hkv, dh = s.heads_per_rank, s.kv_heads_per_rank, s.d_head
    linears = (  # (in, out) of each per-layer linear on one rank, in OPS order
        (s.d_model, (h + 2 * hkv) * dh),
        (h * dh, s.d_model),
        (s.d_model, 2 * s.d_ff // s.tp),
        (s.d_ff // s.tp, s.d_model),
    )
    for i, (fin, fout) in enumerate(linears):
        mf[i, col["tokens"]] = 2.0 * fin * fout * layers
        mb[i, col["has_tokens"]] = fin * fout * bw * layers
        mb[i, col["tokens"]] = (fin + fout) * ba * layers
    # Two RMSNorms (read + write d) and SwiGLU (read 2 d_ff, write d_ff) per token and layer.
    mb[4, col["tokens"]] = ba * (4 * s.d_model + 3 * s.d_ff // s.tp) * layers
    kv_row = 2 * hkv * dh * bkv  # K and V of one token, one layer
    act_row = (h + 2 * hkv) * dh * ba  # its Q, K, V activations
    mf[5, col["decode_kv"]] = 4.0 * h * dh * layers  # q = 1: q (c + (q + 1) / 2) = c + 1
    mb[5, col["decode_kv"]] = kv_row * layers
    mb[5, col["decode_seqs"]] = act_row * layers
    mf[6, col["prefill_qc"]] = 4.0 * h * dh * layers
    mb[6, col["prefill_kv"]] = kv_row * layers
    mb[6, col["prefill_tokens"]] = act_row * layers
    # Logits only for the last token of each request (what vLLM computes).
    vocab = s.vocab // s.tp
    mf[7, col["seqs"]] = 2.0 * s.d_model * vocab
    mb[7, col["has_tokens"]] = s.d_model * vocab * bw
    mb[7, col["seqs"]] = (s.d_model + vocab) * ba
    return mf, mb


def _stats(batch: Batch) -> BatchStats:
    return batch if isinstance(batch, BatchStats) else BatchStats.of(batch)
