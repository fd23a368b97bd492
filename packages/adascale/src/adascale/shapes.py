"""Procedural 32x32 grayscale images for the CPU reproduction: nothing is downloaded.

Ten shape/texture classes drawn at random position, size, contrast and noise. The reproduction
trains on eight (:data:`ID_CLASSES`) and keeps two as near-OOD (:data:`NEAR_CLASSES`): a ring (close
to the disk) and a 135-degree grating (close to the other gratings); four more unseen shapes
(:data:`CANDIDATE_CLASSES`) are probed per class. Far-OOD are crops of
scikit-image's bundled photographs and textures, and uniform/Gaussian noise.
"""

from __future__ import annotations

import functools

import numpy as np

SIZE = 32
CLASSES = (
    "disk",
    "square",
    "triangle",
    "cross",
    "grating0",
    "grating45",
    "grating90",
    "checker",
    "ring",
    "grating135",
    "frame",
    "ellipse",
    "dots",
    "diamond",
)
ID_CLASSES = tuple(range(8))
NEAR_CLASSES = (8, 9)
#: other unseen shapes, probed once in the reproduction (energy and Q' AUROC per class)
CANDIDATE_CLASSES = (10, 11, 12, 13)
FAR_IMAGES = ("camera", "moon", "coins", "brick", "grass", "gravel", "text", "page", "clock")
# input normalisation the models are trained with: eps is in these units
MEAN, STD = 0.3, 0.3


def _grid(n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Per-image centred, rotated coordinates scaled by a random radius."""
    lin = np.arange(SIZE, dtype=np.float32)
    yy, xx = np.meshgrid(lin, lin, indexing="ij")
    cy, cx = rng.uniform(10, 22, (2, n, 1, 1)).astype(np.float32)
    radius = rng.uniform(5, 11, (n, 1, 1)).astype(np.float32)
    angle = rng.uniform(-0.35, 0.35, (n, 1, 1)).astype(np.float32)
    dy, dx = (yy - cy) / radius, (xx - cx) / radius
    u = np.cos(angle) * dx + np.sin(angle) * dy
    v = -np.sin(angle) * dx + np.cos(angle) * dy
    return u, v, radius


def _mask(cls: int, n: int, rng: np.random.Generator) -> np.ndarray:
    u, v, radius = _grid(n, rng)
    name = CLASSES[cls]
    if name == "disk":
        return (u**2 + v**2 <= 1).astype(np.float32)
    if name == "ring":
        r = np.sqrt(u**2 + v**2)
        return ((r <= 1) & (r >= 0.55)).astype(np.float32)
    if name == "frame":
        return (
            (np.maximum(np.abs(u), np.abs(v)) <= 0.9) & (np.maximum(np.abs(u), np.abs(v)) >= 0.6)
        ).astype(np.float32)
    if name == "ellipse":
        return ((u / 1.3) ** 2 + (v / 0.45) ** 2 <= 1).astype(np.float32)
    if name == "diamond":
        return (np.abs(u) + np.abs(v) <= 1).astype(np.float32)
    if name == "dots":
        lin = np.arange(SIZE, dtype=np.float32)
        yy, xx = np.meshgrid(lin, lin, indexing="ij")
        out = np.zeros((n, SIZE, SIZE), dtype=np.float32)
        for _ in range(4):
            cy, cx = rng.uniform(4, 28, (2, n, 1, 1)).astype(np.float32)
            out = np.maximum(out, ((yy - cy) ** 2 + (xx - cx) ** 2 <= 6.0).astype(np.float32))
        return out
    if name == "square":
        return ((np.abs(u) <= 0.8) & (np.abs(v) <= 0.8)).astype(np.float32)
    if name == "triangle":
        return ((v <= 0.7) & (v >= 2 * np.abs(u) - 1.0)).astype(np.float32)
    if name == "cross":
        return (
            ((np.abs(u) <= 0.25) | (np.abs(v) <= 0.25)) & (np.abs(u) <= 1) & (np.abs(v) <= 1)
        ).astype(np.float32)
    if name == "checker":
        cell = radius / 2.5
        return (((np.floor(u * radius / cell) + np.floor(v * radius / cell)) % 2) == 0).astype(
            np.float32
        )
    theta = np.deg2rad(float(name.removeprefix("grating")))
    period = rng.uniform(4, 7, (n, 1, 1)).astype(np.float32)
    lin = np.arange(SIZE, dtype=np.float32)
    yy, xx = np.meshgrid(lin, lin, indexing="ij")
    phase = rng.uniform(0, 2 * np.pi, (n, 1, 1)).astype(np.float32)
    wave = np.sin(2 * np.pi * (np.cos(theta) * xx + np.sin(theta) * yy) / period + phase)
    return (wave > 0).astype(np.float32)


def _finish(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Random background/foreground levels and pixel noise, clipped to [0, 1]."""
    n = mask.shape[0]
    bg = rng.uniform(0.0, 0.35, (n, 1, 1)).astype(np.float32)
    fg = bg + rng.uniform(0.35, 0.65, (n, 1, 1)).astype(np.float32)
    noise = rng.normal(0, rng.uniform(0.02, 0.08, (n, 1, 1)), mask.shape).astype(np.float32)
    return np.clip(bg + (fg - bg) * mask + noise, 0, 1)


def shapes(classes: tuple[int, ...], n_per_class: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(images (N, 1, 32, 32) in [0, 1], labels)`` for ``classes``, shuffled."""
    rng = np.random.default_rng(seed)
    xs = [_finish(_mask(c, n_per_class, rng), rng) for c in classes]
    ys = [np.full(n_per_class, i, dtype=np.int64) for i, _ in enumerate(classes)]
    x, y = np.concatenate(xs)[:, None], np.concatenate(ys)
    order = rng.permutation(len(y))
    return x[order], y[order]


@functools.lru_cache(maxsize=1)
def _photos() -> tuple[np.ndarray, ...]:
    """scikit-image's bundled images of :data:`FAR_IMAGES`, gray, in [0, 1]."""
    from skimage import color, data

    photos = []
    for name in FAR_IMAGES:
        img = getattr(data, name)()
        if img.ndim == 3:
            img = color.rgb2gray(img[..., :3])
        photos.append(img.astype(np.float32) / (255.0 if img.max() > 1 else 1.0))
    return tuple(photos)


def far_ood(n: int, seed: int) -> np.ndarray:
    """``n`` far-OOD images: half photo/texture crops (scikit-image), a quarter each noise kind."""
    from skimage import transform

    rng = np.random.default_rng(seed)
    photos = _photos()
    n_photo = n // 2
    crops = np.empty((n_photo, SIZE, SIZE), dtype=np.float32)
    for i in range(n_photo):
        img = photos[rng.integers(len(photos))]
        side = int(rng.integers(32, min(img.shape) // 2))
        top, left = (int(rng.integers(s - side)) for s in img.shape)
        crop = img[top : top + side, left : left + side]
        crops[i] = transform.resize(crop, (SIZE, SIZE), anti_aliasing=True)
    n_noise = n - n_photo
    uniform = rng.uniform(0, 1, (n_noise // 2, SIZE, SIZE)).astype(np.float32)
    gauss = np.clip(rng.normal(0.3, 0.2, (n_noise - n_noise // 2, SIZE, SIZE)), 0, 1)
    out = np.concatenate([crops, uniform, gauss.astype(np.float32)])[:, None]
    return out[rng.permutation(n)]


def normalise(x: np.ndarray) -> np.ndarray:
    """Pixels in [0, 1] to the models' input units."""
    return ((x - MEAN) / STD).astype(np.float32)
