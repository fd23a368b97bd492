"""Drop-ins for code written against other libraries."""

from __future__ import annotations

import torch

from prism_matfn.matfn import polar


def zeropower_via_prism(G: torch.Tensor, steps: int = 5, **options: object) -> torch.Tensor:
    """PRISM5 in place of Muon's ``zeropower_via_newtonschulz5(G, steps)``: same arguments, same result
    shape, and (like Muon) returned in bfloat16 on CUDA, in ``G``'s dtype elsewhere.

    Unlike Muon's quintic, the output's singular values converge to 1. ``options`` go to
    :func:`prism_matfn.polar` (e.g. ``degree=3``, ``fit="exact"``).
    """
    if G.is_cuda:
        options.setdefault("compute_dtype", torch.bfloat16)  # Muon's precision on the GPU
    out = polar(G, steps=steps, check_finite=False, **options)
    return out.bfloat16() if G.is_cuda else out


def dion_newton_schulz(X: torch.Tensor, epsilon: float = 1e-7, **options: object) -> torch.Tensor:
    """PRISM5 for ``microsoft/dion``'s ``newton_schulz_func``, called as ``func(X, epsilon=...)`` on a
    batch ``(..., m, n)``. ``epsilon`` is accepted for the signature and unused: PRISM normalises
    without an eps, so a tiny ``X`` is not collapsed. Returns ``X``'s dtype (bfloat16 on CUDA)."""
    del epsilon
    return zeropower_via_prism(X, int(options.pop("steps", 5)), **options)  # type: ignore[call-overload]
