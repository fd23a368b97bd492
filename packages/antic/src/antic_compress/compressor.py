"""NeuralFieldCompressor: a neural field and its online normaliser, the spatial half of ANTIC."""

from __future__ import annotations

import torch

from antic_compress.fields import NeuralField, build_model
from antic_compress.normalizers import NORMALIZERS, MinMaxNormalizer, WelfordNormalizer
from antic_compress.training import FitConfig, Trainable, check_pair, fit, mse, predict

Tensor = torch.Tensor


class NeuralFieldCompressor:
    """Holds ``model`` (an :class:`MLPPlus`, :class:`SIREN` or :class:`MLP`) and a normaliser.

    ``normalization``: ``"minmax"`` (to [0, 1], over the last ``norm_window`` snapshots, or all of
    them with ``norm_window=None``) or ``"welford"`` (z-score over the window).
    """

    def __init__(
        self, model: NeuralField, normalization: str = "minmax", norm_window: int | None = 100
    ) -> None:
        if normalization not in NORMALIZERS:
            raise ValueError(
                f"normalization must be one of {sorted(NORMALIZERS)}, got {normalization!r}"
            )
        if normalization == "welford" and norm_window is None:
            raise ValueError("the welford normaliser needs a finite norm_window")
        self.model = model
        self.normalization = normalization
        self.norm_window = norm_window
        self.normalizer: MinMaxNormalizer | WelfordNormalizer = (
            MinMaxNormalizer(norm_window)
            if normalization == "minmax"
            else WelfordNormalizer(int(norm_window or 1))
        )

    @property
    def in_dim(self) -> int:
        return int(self.model.config["in_dim"])

    @property
    def out_dim(self) -> int:
        return int(self.model.config["out_dim"])

    def fresh_model(self) -> NeuralField:
        """The model as first initialised (same class, configuration and seed), on the model's device."""
        device = next(self.model.parameters()).device
        return build_model(type(self.model).__name__, self.model.config).to(device)

    def fit(
        self,
        coords: Tensor,
        target: Tensor,
        config: FitConfig,
        which: Trainable = "all",
        generator: torch.Generator | None = None,
        distributed: bool = False,
    ) -> float:
        """Fit the model to the already-normalised ``target``; the last epoch's mean loss."""
        check_pair(coords, target, self.in_dim, self.out_dim)
        return fit(self.model, coords, target, config, which, generator, distributed)

    def reconstruct(self, coords: Tensor) -> Tensor:
        """The current model's output at ``coords``, de-normalised with the current statistics."""
        return self.normalizer.denormalize(predict(self.model, coords))

    def loss(self, coords: Tensor, normalized_target: Tensor) -> float:
        return mse(self.model, coords, normalized_target)
