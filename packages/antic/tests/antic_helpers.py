"""Tiny streaming runs shared by the tests (16x16 frames, a few epochs: seconds on one thread)."""

import math

import torch
from antic_compress import ANTIC, EnstrophySelector, MLPPlus, NeuralFieldCompressor, grid_coords

N = 16


def frames(count=12, seed=0):
    x = grid_coords(N).reshape(N, N, 2)
    g = torch.Generator().manual_seed(seed)
    phase = torch.rand(4, generator=g) * 6
    out = []
    for i in range(count):
        t = 0.1 * (i + 1)
        w = torch.sin(x[..., 0] + phase[0] + t) * torch.cos(
            2 * x[..., 1] + phase[1]
        ) + 0.3 * math.sin(3 * t)
        out.append((t, w.to(torch.float32)))
    return out


def compressor(seed=0):
    return NeuralFieldCompressor(
        MLPPlus(hidden=8, layers=2, fourier_dim=8, fourier_scale=1.0, seed=seed)
    )


def antic(path, selector=None, **kwargs):
    settings = dict(
        initial_epochs=4,
        subsequent_epochs=2,
        batch_size=64,
        lr=1e-2,
        adapter="lora",
        lora_rank=2,
        reset_every_n=4,
    )
    settings.update(kwargs)
    return ANTIC(
        selector or EnstrophySelector(window_size=3), compressor(), grid_coords(N), path, **settings
    )
