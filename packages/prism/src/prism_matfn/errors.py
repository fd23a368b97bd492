"""Exceptions raised by prism-matfn."""

from __future__ import annotations


class ConvergenceError(RuntimeError):
    """An iteration diverged (residual non-finite, or growing well past its start) instead of converging.

    Raised rather than returning garbage: typical causes are a ``sign`` input with complex eigenvalues
    (e.g. ``[[0, -1], [1, 0]]``) or ``alpha_bounds`` outside the convergent range with
    ``allow_unsafe=True``.
    """
