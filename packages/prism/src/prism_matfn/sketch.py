"""The Gaussian sketch ``S`` (n×p, entries N(0, 1/p), so E[S Sᵀ] = I) that PRISM fits α with."""

from __future__ import annotations

import torch

_CACHE: dict[tuple[int, int, int, str, torch.dtype], torch.Tensor] = {}
_CACHE_LIMIT = 256


def gaussian_sketch(
    n: int,
    p: int,
    *,
    seed: int = 0,
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """An ``(n, p)`` Gaussian sketch with entries ``N(0, 1/p)``.

    Without ``generator`` the draw is seeded by ``seed`` and cached, so repeated calls (every step of an
    optimizer) reuse the same sketch and cost nothing. With ``generator`` a fresh draw is made from it.
    """
    if n < 1 or p < 1:
        raise ValueError(f"sketch needs n >= 1 and p >= 1, got n={n}, p={p}")
    if generator is not None:
        S = torch.randn(n, p, generator=generator, dtype=torch.float64, device=generator.device)
        return (S / p**0.5).to(device=device, dtype=dtype)
    key = (n, p, seed, str(torch.device(device)), dtype)
    cached = _CACHE.get(key)
    if cached is None:
        # Drawn on the CPU in float64 so the same seed gives the same sketch on every device and dtype.
        g = torch.Generator().manual_seed(seed)
        cached = (torch.randn(n, p, generator=g, dtype=torch.float64) / p**0.5).to(device, dtype)
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = cached
    return cached
