"""``SPUConfig``: the hyper-parameters of an SPU model, as a transformers ``PretrainedConfig``."""

from __future__ import annotations

from typing import Any

from transformers import PretrainedConfig

from spu_dna.functional import check_filter_taps
from spu_dna.layers import EXTRAPOLATIONS, FUSIONS, PADS, SPL_MODES

__all__ = ["SPUConfig"]

POOLINGS = ("mean", "saliency")


class SPUConfig(PretrainedConfig):
    """Every choice the reconstruction makes is a field (spec section 3); see :class:`~spu_dna.layers.SPUBlock`.

    ``pooling``: ``"mean"`` (masked mean) or ``"saliency"`` (weighted by the last block's token
    saliency). ``rc_equivariant``: average the model over a sequence and its reverse complement
    (Caduceus-PH), so that a sequence and its reverse complement get the same logits.
    ``length_extrapolation``: ``"error"`` refuses sequences longer than ``dpl_max_len``,
    ``"interpolate"`` samples the global filter on the longer grid. ``dpl_filter_taps``: the number of
    learned frequencies of the global filter (its size does not grow with ``dpl_max_len``). ``backend``: the token-convolution kernel
    (``"auto" | "torch" | "triton"``).
    """

    model_type = "spu"
    # Saliency maps and hidden states vary in length across batches: Trainer must not gather them.
    keys_to_ignore_at_inference = ["hidden_states", "saliency"]  # noqa: RUF012 (transformers API)

    def __init__(
        self,
        vocab_size: int = 10,
        d_model: int = 128,
        n_layers: int = 4,
        lpl_kernel: int = 9,
        lpl_groups: int = 8,
        lpl_softmax: bool = True,
        dpl_time_kernel: int = 5,
        dpl_max_len: int = 1024,
        dpl_filter: str = "global",
        dpl_filter_taps: int = 128,
        dpl_pad: str = "linear",
        dpl_fusion: str = "gate",
        length_extrapolation: str = "error",
        spl_mode: str = "residual",
        spl_reduction: int = 4,
        use_lpl: bool = True,
        use_dpl_time: bool = True,
        use_dpl_freq: bool = True,
        use_spl: bool = True,
        dropout: float = 0.1,
        rc_equivariant: bool = False,
        pooling: str = "mean",
        backend: str = "auto",
        pad_token_id: int = 0,
        mask_token_id: int = 3,
        **kwargs: Any,
    ) -> None:
        if dpl_filter != "global":
            raise ValueError(
                f"dpl_filter must be 'global' (the only filter built), got {dpl_filter!r}"
            )
        choices = {
            "pooling": (pooling, POOLINGS),
            "dpl_pad": (dpl_pad, PADS),
            "dpl_fusion": (dpl_fusion, FUSIONS),
            "spl_mode": (spl_mode, SPL_MODES),
            "length_extrapolation": (length_extrapolation, EXTRAPOLATIONS),
        }
        for name, (value, allowed) in choices.items():
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
        for name, size, low in (
            ("dpl_max_len", dpl_max_len, 1), ("lpl_kernel", lpl_kernel, 1),
        ):  # fmt: skip
            if size < low:
                raise ValueError(f"{name} must be >= {low}, got {size}")
        if pooling == "saliency" and not use_spl:
            raise ValueError("pooling='saliency' needs use_spl=True")
        if d_model < 1 or n_layers < 1:
            raise ValueError(f"need d_model >= 1 and n_layers >= 1, got {d_model} and {n_layers}")
        self.vocab_size, self.d_model, self.n_layers = vocab_size, d_model, n_layers
        self.lpl_kernel, self.lpl_groups, self.lpl_softmax = lpl_kernel, lpl_groups, lpl_softmax
        self.dpl_time_kernel, self.dpl_max_len, self.dpl_filter = (
            dpl_time_kernel,
            dpl_max_len,
            dpl_filter,
        )
        self.dpl_filter_taps = check_filter_taps(dpl_filter_taps, "dpl_filter_taps")
        self.dpl_pad, self.dpl_fusion = dpl_pad, dpl_fusion
        self.length_extrapolation = length_extrapolation
        self.spl_mode, self.spl_reduction = spl_mode, spl_reduction
        self.use_lpl, self.use_dpl_time = use_lpl, use_dpl_time
        self.use_dpl_freq, self.use_spl = use_dpl_freq, use_spl
        self.dropout, self.rc_equivariant, self.pooling = dropout, rc_equivariant, pooling
        self.backend = backend
        self.mask_token_id = mask_token_id
        self.pad_token_id = pad_token_id
        super().__init__(**kwargs)

    @property
    def hidden_size(self) -> int:
        # transformers utilities (Trainer's auto batch sizing, DeepSpeed) read `hidden_size`.
        return self.d_model

    def block_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :class:`~spu_dna.layers.SPUBlock` this config sets."""
        names = (
            "lpl_kernel", "lpl_groups", "lpl_softmax", "dpl_time_kernel", "dpl_max_len", "dpl_pad",
            "dpl_fusion", "length_extrapolation", "dpl_filter_taps", "spl_mode", "spl_reduction", "use_lpl",
            "use_dpl_time", "use_dpl_freq", "use_spl", "dropout", "backend",
        )  # fmt: skip
        return {name: getattr(self, name) for name in names}
