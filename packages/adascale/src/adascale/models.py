"""Splitting a classifier into a penultimate-feature backbone and its final linear head.

Keyed on class and module names, never on imports (torchvision and timm stay optional):

- torchvision ``ResNet``, ``RegNet``: head ``fc``; ``VisionTransformer``: ``heads.head``;
  ``SwinTransformer``: ``head``;
- timm models: ``pretrained_cfg["classifier"]`` (``fc``, ``head``, ``head.fc`` ...);
- any other model with a direct ``nn.Linear`` child named ``fc``, ``head`` or ``classifier``;
- anything else: name the head with ``head=`` (any ``nn.Linear`` submodule).

The backbone runs the *whole* model once with a forward pre-hook on the head that captures its input
(the penultimate features): no duplicated code path, no re-implemented ``forward``. Or
``feature_layer=`` captures another module's output instead; the head must then map that layer's
flattened output (e.g. a feature layer right before a pooling-free ``Linear``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

_HEADS = {
    "ResNet": "fc",
    "RegNet": "fc",
    "VisionTransformer": "heads.head",
    "SwinTransformer": "head",
}
# the final layer's usual names, tried (as a direct nn.Linear child) for any other class
_COMMON = ("fc", "head", "classifier")


def head_name(model: nn.Module) -> str:
    """The name of ``model``'s final linear layer, from its class or timm's config."""
    cfg: Any = getattr(model, "pretrained_cfg", None) or getattr(model, "default_cfg", None)
    if isinstance(cfg, dict) and isinstance(cfg.get("classifier"), str):
        return str(cfg["classifier"])
    for cls in type(model).__mro__:
        if cls.__name__ in _HEADS:
            return _HEADS[cls.__name__]
    for name in _COMMON:
        if isinstance(getattr(model, name, None), nn.Linear):
            return name
    raise ValueError(
        f"cannot tell the final linear layer of a {type(model).__name__}; pass head='<name>' "
        f"(its Linear submodules: {[n for n, m in model.named_modules() if isinstance(m, nn.Linear)]})"
    )


class HookedBackbone(nn.Module):
    """Runs ``model`` and returns the captured input of its head (or a ``feature_layer``'s output)."""

    def __init__(self, model: nn.Module, head: str, feature_layer: str | None = None) -> None:
        super().__init__()
        self.model = model
        self.head_name, self.feature_layer = head, feature_layer
        self._captured: Tensor | None = None
        if feature_layer is None:
            model.get_submodule(head).register_forward_pre_hook(self._capture_input)
        else:
            model.get_submodule(feature_layer).register_forward_hook(self._capture_output)

    # The wrapper has no state of its own: its mode is the wrapped model's (so a model put in
    # eval() before the split is not reported as training).
    @property
    def training(self) -> bool:
        model = self.__dict__.get("_modules", {}).get("model")
        return True if model is None else bool(model.training)

    @training.setter
    def training(self, mode: bool) -> None:
        pass

    def _capture_input(self, module: nn.Module, args: tuple[Tensor, ...]) -> None:
        self._captured = args[0]

    def _capture_output(self, module: nn.Module, args: Any, output: Tensor) -> None:
        self._captured = output

    def forward(self, x: Tensor) -> Tensor:
        self._captured = None
        self.model(x)
        if self._captured is None:
            raise RuntimeError(f"the hooked layer of {type(self.model).__name__} never ran")
        z, self._captured = self._captured, None
        return z.flatten(1)


def split_model(
    model: nn.Module, *, head: str | None = None, feature_layer: str | None = None
) -> tuple[HookedBackbone, nn.Linear]:
    """``(backbone, head)`` for a detector: ``AdaSCALE(*split_model(resnet50()))``."""
    name = head or head_name(model)
    try:
        layer = model.get_submodule(name)
    except AttributeError as error:
        raise ValueError(f"{type(model).__name__} has no submodule {name!r}") from error
    if not isinstance(layer, nn.Linear):
        raise TypeError(
            f"{type(model).__name__}.{name} is a {type(layer).__name__}, not the final "
            "torch.nn.Linear; pass head= naming the linear classifier"
        )
    if feature_layer is not None:
        model.get_submodule(feature_layer)  # fail now, not at the first call
    return HookedBackbone(model, name, feature_layer), layer


def features_of(backbone: Any, x: Tensor, batch_size: int = 256) -> Tensor:
    """Backbone features of ``x`` in batches, without grad: the cache a sweep re-scores."""
    with torch.no_grad():
        return torch.cat([backbone(x[i : i + batch_size]) for i in range(0, len(x), batch_size)])
