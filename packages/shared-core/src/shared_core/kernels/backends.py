"""Choosing between a triton kernel and its pure-torch reference.

Every op in :mod:`shared_core.kernels` has a ``*_reference`` written in plain torch (the oracle, and the
path on CPU) and may have a triton kernel. ``backend="auto"`` takes the kernel for CUDA tensors, or for
any tensor when ``TRITON_INTERPRET=1`` was set before Python started (how CI tests kernels on CPU).
"""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Callable, Sequence
from typing import Literal, TypeVar

import torch

Backend = Literal["auto", "torch", "triton"]
BACKENDS: tuple[str, ...] = ("auto", "torch", "triton")

HAS_TRITON: bool = importlib.util.find_spec("triton") is not None

T = TypeVar("T")


def interpreting() -> bool:
    """True when triton runs kernels in its CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


@functools.cache
def _cuda_available() -> bool:
    return torch.cuda.is_available()


def triton_enabled() -> bool:
    """Whether a triton kernel can be launched here at all."""
    return HAS_TRITON and (interpreting() or _cuda_available())


def resolve_backend(backend: str, *tensors: torch.Tensor) -> Literal["torch", "triton"]:
    """Resolve ``backend`` for an op on ``tensors``.

    ``"auto"`` gives ``"triton"`` when triton can launch and the tensors live where it runs (CUDA, or
    anywhere under the interpreter), ``"torch"`` otherwise. An explicit ``"triton"`` that cannot run
    raises instead of silently falling back, so a user who asked for the kernel knows they did not get it.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "torch":
        return "torch"
    on_device = all(t.is_cuda for t in tensors) or interpreting()
    if backend == "triton":
        if not HAS_TRITON:
            raise RuntimeError(
                "backend='triton' needs the triton package: pip install 'shared-core[triton]'"
            )
        if not on_device:
            raise RuntimeError(
                "backend='triton' needs CUDA tensors, or TRITON_INTERPRET=1 set before Python starts "
                "to run kernels on CPU"
            )
        return "triton"
    return "triton" if triton_enabled() and on_device else "torch"


def autotune_configs(configs: Sequence[T]) -> list[T]:
    """Autotune candidates, cut to the first under the interpreter.

    The interpreter's benchmarker asks for an active GPU driver and fails on a CPU machine when it has
    more than one config to compare; with one config it never benchmarks.
    """
    if not configs:
        raise ValueError("autotune_configs needs at least one config")
    return [configs[0]] if interpreting() else list(configs)


def dispatch(
    backend: str,
    reference: Callable[..., T],
    kernel: Callable[..., T] | None,
    *tensors: torch.Tensor,
) -> Callable[..., T]:
    """Return the callable that ``backend`` resolves to for ``tensors``.

    ``kernel`` is ``None`` when triton is not installed (its module could not define one).
    """
    chosen = resolve_backend(backend, *tensors)
    if chosen == "triton":
        if kernel is None:
            raise RuntimeError("no triton kernel is available for this op")
        return kernel
    return reference
