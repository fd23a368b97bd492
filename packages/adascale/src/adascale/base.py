"""The detector interface, in pytorch-ood's shape: ``score`` (higher = in-distribution), ``predict`` (= -score).

Every detector holds a ``backbone`` (input -> ``(B, D)`` penultimate features) and a linear
``head``. ``extract(x)`` returns the features a detector needs as a tuple (``(z,)``, or
``(z, z_perturbed)`` for AdaSCALE); ``score_features(*features)`` scores them, so a sweep over
hyper-parameters that do not touch the features re-scores cached features without another pass.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, TypeAlias

import torch
from torch import Tensor, nn

Data: TypeAlias = "Tensor | Iterable[Any]"


class NotFittedError(RuntimeError):
    """A detector that needs ID statistics was used before ``fit``."""


#: rows per pass when a detector is handed one big tensor (5000 ImageNet images are not one batch)
TENSOR_BATCH = 256


def batches(data: Data) -> Iterable[Tensor]:
    """The input tensors of ``data``: a tensor (in chunks of :data:`TENSOR_BATCH` rows), or a loader
    of tensors / (x, y) pairs."""
    if isinstance(data, Tensor):
        yield from data.split(TENSOR_BATCH)
        return
    for batch in data:
        x = batch[0] if isinstance(batch, (tuple, list)) else batch
        if isinstance(x, dict):
            raise TypeError("batches must be tensors or (inputs, labels) pairs, got a dict")
        if not isinstance(x, Tensor):
            raise TypeError(f"a batch must hold a tensor of inputs, got {type(x).__name__}")
        yield x


def check_inputs(x: Tensor) -> None:
    """Reject integer images and warn on [0, 255] floats: eps is in normalised units."""
    if not x.is_floating_point():
        raise TypeError(
            f"inputs must be float tensors normalised like the model's training data, got "
            f"{x.dtype} (convert uint8 images with x.float() / 255 and normalise them)"
        )
    if x.numel() and float(x.detach().abs().amax()) > 50:
        warnings.warn(
            f"inputs reach |x| = {float(x.detach().abs().amax()):.4g}: they look like raw [0, 255] "
            "pixels, but eps is in the model's normalised input units",
            stacklevel=3,
        )


class Detector(nn.Module):
    """Shared plumbing: device, eval mode, the backbone/head split, input and feature checks."""

    #: hyper-parameters whose change needs new features (``extract``) rather than a re-score
    input_keys: ClassVar[tuple[str, ...]] = ()

    def __init__(self, backbone: Callable[[Tensor], Tensor], head: nn.Module) -> None:
        super().__init__()
        if not isinstance(head, nn.Linear):
            raise TypeError(
                f"head must be the model's final torch.nn.Linear (W z + b), got "
                f"{type(head).__name__}; split the model with adascale.split_model or pass the "
                "penultimate-feature backbone and the linear layer explicitly"
            )
        if not callable(backbone):
            raise TypeError(f"backbone must be callable, got {type(backbone).__name__}")
        self.backbone = backbone
        self.head: nn.Linear = head

    @property
    def device(self) -> torch.device:
        return self.head.weight.device

    def _eval_mode(self) -> None:
        modules = [m for m in (self.backbone, self.head) if isinstance(m, nn.Module)]
        if any(sub.training for m in modules for sub in m.modules()):
            warnings.warn(
                "the model was in train() mode (BatchNorm/dropout would change the features "
                "between passes); switched it to eval()",
                stacklevel=3,
            )
            for m in modules:
                m.eval()

    def features(self, x: Tensor) -> Tensor:
        """Penultimate features ``(B, D)`` of ``x``, checked."""
        check_inputs(x)
        z = self.backbone(x.to(self.device))
        if z.ndim > 2:
            z = z.flatten(1)
        if z.ndim != 2 or z.shape[1] != self.head.in_features:
            raise ValueError(
                f"backbone gave features of shape {tuple(z.shape)}; the head expects "
                f"(B, {self.head.in_features})"
            )
        if not bool(torch.isfinite(z).all()):
            raise ValueError("the backbone returned NaN or Inf features")
        return z

    def extract(self, x: Tensor) -> tuple[Tensor, ...]:
        """What :meth:`score_features` needs for ``x``."""
        self._eval_mode()
        with torch.no_grad():
            return (self.features(x),)

    # Each detector defines ``score_features(...)`` over exactly what its ``extract`` returns
    # (``(z)``, or ``(z, z_perturbed)``); declared as an attribute so those signatures may differ.
    score_features: Callable[..., Tensor]

    def score(self, x: Tensor) -> Tensor:
        """``(B,)`` scores, higher = more in-distribution (OpenOOD's ``conf``)."""
        with torch.no_grad():
            return self.score_features(*self.extract(x))

    def predict_features(self, *features: Tensor) -> Tensor:
        """``(B,)`` outlier scores from features, higher = more OOD (pytorch-ood's sign)."""
        return -self.score_features(*features)

    def predict(self, x: Tensor) -> Tensor:
        """``(B,)`` outlier scores, higher = more OOD (pytorch-ood's sign); ``= -score(x)``."""
        return -self.score(x)

    def forward(self, x: Tensor) -> Tensor:
        return self.predict(x)

    def fit(self, data: Data) -> Detector:
        """Nothing to learn for this detector; returns ``self`` (labels are never used)."""
        return self

    def extract_all(self, data: Data, limit: int | None = None) -> tuple[Tensor, ...]:
        """:meth:`extract` over a loader, concatenated (at most ``limit`` rows)."""
        parts: list[tuple[Tensor, ...]] = []
        seen = 0
        for x in batches(data):
            parts.append(self.extract(x))
            seen += x.shape[0]
            if limit is not None and seen >= limit:
                break
        if not parts:
            raise ValueError("the data yielded no batch")
        joined = tuple(torch.cat(cols) for cols in zip(*parts, strict=True))
        return joined if limit is None else tuple(t[:limit] for t in joined)
