"""Name -> loader registry, so method packages can add their own data sets."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

Loader = TypeVar("Loader", bound=Callable[..., Any])

_LOADERS: dict[str, Callable[..., Any]] = {}


def _qualified_name(fn: Callable[..., Any]) -> str:
    if isinstance(fn, functools.partial):
        return f"{_qualified_name(fn.func)}(*{fn.args!r}, **{fn.keywords!r})"
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def register_loader(name: str) -> Callable[[Loader], Loader]:
    """Decorator registering ``fn`` under ``name`` for :func:`load`.

    Registering a different function under a taken name raises ``ValueError``;
    re-registering the same function (e.g. when a module is imported twice) is a no-op.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"loader name must be a non-empty string, got {name!r}")

    def decorator(fn: Loader) -> Loader:
        existing = _LOADERS.get(name)
        if existing is not None and _qualified_name(existing) != _qualified_name(fn):
            raise ValueError(
                f"loader {name!r} is already registered to {_qualified_name(existing)}; "
                f"refusing to replace it with {_qualified_name(fn)}"
            )
        _LOADERS[name] = fn
        return fn

    return decorator


def available_loaders() -> list[str]:
    """Sorted names accepted by :func:`load`."""
    return sorted(_LOADERS)


def load(name: str, **kwargs: Any) -> Any:
    """Call the loader registered as ``name`` with ``kwargs``."""
    try:
        loader = _LOADERS[name]
    except KeyError:
        raise KeyError(
            f"unknown data loader {name!r}; available: {', '.join(available_loaders())}"
        ) from None
    return loader(**kwargs)
