"""Natural-image patches, offline: scikit-image's and scikit-learn's bundled images, a folder, or a
classic whitened-image ``.mat`` file; ZCA whitening; the degradations (contrast, noise) of the claims.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = [
    "SKIMAGE_IMAGES",
    "TEXTURES",
    "ZCAWhitener",
    "check_whitened",
    "degrade",
    "gratings",
    "load_images",
    "natural_patches",
]

# Bundled with scikit-image 0.26 and readable offline (the colour ones are read as gray).
SKIMAGE_IMAGES = (
    "camera", "moon", "brick", "grass", "gravel", "coins", "text", "page", "clock",
    "astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field", "immunohistochemistry",
)  # fmt: skip
# The source-texture labels of the read-out task (spec section 5).
TEXTURES = ("brick", "grass", "gravel", "moon", "coins", "camera")


def _gray(image: np.ndarray) -> np.ndarray:
    image = np.asarray(image, dtype=np.float64)
    if image.ndim == 3:
        image = image[..., :3].mean(axis=2)
    if image.ndim != 2:
        raise ValueError(f"an image must be 2-D (or H x W x channels), got shape {image.shape}")
    span = image.max() - image.min()
    return (image - image.min()) / span if span > 0 else image * 0.0


def _skimage(names: Sequence[str]) -> list[np.ndarray]:
    try:
        from skimage import data as skdata
    except ImportError as error:  # pragma: no cover - the reproduce extra brings it
        raise ImportError(
            "images='skimage' needs scikit-image: pip install 'ssn-lateral[reproduce]'"
        ) from error
    return [_gray(getattr(skdata, name)()) for name in names]


def _mat(path: Path) -> list[np.ndarray]:
    from scipy.io import loadmat

    arrays = {k: v for k, v in loadmat(path).items() if not k.startswith("__")}
    stack = arrays.get("IMAGES", arrays.get("IMAGESr"))
    if stack is None:
        stack = next((v for v in arrays.values() if getattr(v, "ndim", 0) == 3), None)
    if stack is None:
        raise ValueError(f"{path} holds no (H, W, n_images) array; keys: {sorted(arrays)}")
    # the classic files are already whitened: keep their values, do not rescale to [0, 1]
    return [np.asarray(stack[:, :, i], dtype=np.float64) for i in range(stack.shape[2])]


def _folder(path: Path) -> list[np.ndarray]:
    files = sorted(
        p
        for p in path.iterdir()
        if p.suffix.lower() in {".npy", ".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp"}
    )
    if not files:
        raise ValueError(f"no images (.npy, .png, .jpg, .tif, .bmp) in folder {path}")
    images = []
    for file in files:
        if file.suffix.lower() == ".npy":
            images.append(_gray(np.load(file)))
        else:
            from PIL import Image  # Pillow comes with matplotlib (the reproduce extra)

            with Image.open(file) as im:
                images.append(_gray(np.asarray(im.convert("L"))))
    return images


def load_images(
    images: str | Path | Sequence[np.ndarray] | Sequence[str] = "skimage",
) -> list[np.ndarray]:
    """Gray images from a source name, a folder, a ``.mat`` file, a list of names or of arrays."""
    if isinstance(images, (str, Path)):
        key = str(images)
        if key == "skimage":
            return _skimage(SKIMAGE_IMAGES)
        if key == "textures":
            return _skimage(TEXTURES)
        if key == "sklearn":
            from sklearn.datasets import load_sample_images

            return [_gray(im) for im in load_sample_images().images]
        path = Path(images)
        if path.is_dir():
            return _folder(path)
        if path.suffix.lower() == ".mat" and path.exists():
            return _mat(path)
        raise ValueError(
            f"images={images!r}: expected 'skimage', 'textures', 'sklearn', an image folder or a "
            ".mat file that exists"
        )
    items = list(images)
    if not items:
        raise ValueError("images is an empty sequence")
    if all(isinstance(i, str) for i in items):
        return _skimage([str(i) for i in items])
    return [_gray(np.asarray(i)) for i in items]


class ZCAWhitener:
    """ZCA whitening ``(x - mean) U diag(1/sqrt(max(lam, floor))) U^T``, floor = ``eps * lam_max``."""

    def __init__(self, eps: float = 1e-5) -> None:
        if not eps > 0:
            raise ValueError(f"eps must be > 0, got {eps}")
        self.eps = eps

    def fit(self, X: np.ndarray) -> ZCAWhitener:
        X = np.asarray(X, dtype=np.float64)
        self.mean_ = X.mean(axis=0)
        cov = np.atleast_2d(np.cov(X - self.mean_, rowvar=False))
        lam, U = np.linalg.eigh(cov)
        lam = np.maximum(lam, self.eps * lam.max())
        self.matrix_ = (U / np.sqrt(lam)) @ U.T
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        return (np.asarray(X, dtype=np.float64) - self.mean_) @ self.matrix_


def _sample(image: np.ndarray, count: int, size: int, rng: np.random.Generator) -> np.ndarray:
    h, w = image.shape
    if h < size or w < size:
        raise ValueError(f"an image of shape {image.shape} is smaller than the patch size {size}")
    rows = rng.integers(0, h - size + 1, count)
    cols = rng.integers(0, w - size + 1, count)
    return np.stack(
        [image[r : r + size, c : c + size].ravel() for r, c in zip(rows, cols, strict=True)]
    )


def natural_patches(
    n: int,
    size: int = 8,
    images: str | Path | Sequence[np.ndarray] | Sequence[str] = "skimage",
    whiten: str | None = "zca",
    *,
    normalize: bool = True,
    random_state: int | np.random.Generator | None = None,
    return_labels: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """``n`` patches of ``size x size`` pixels, equally many from each image, as ``(n, size**2)``.

    Each patch is mean-subtracted; ``whiten="zca"`` whitens them with a ZCA fitted on these patches;
    ``normalize`` scales each to unit norm (contrast 1). Near-flat patches (variance below 1 % of the
    image's median) are redrawn: unit-normalising them would amplify pixel noise. With
    ``return_labels`` the image index of each patch comes too (texture labels for
    ``images="textures"``, in the order of :data:`TEXTURES`).
    """
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if not isinstance(size, (int, np.integer)) or size < 2:
        raise ValueError(f"size must be an int >= 2, got {size!r}")
    if whiten not in ("zca", None):
        raise ValueError(f"whiten must be 'zca' or None, got {whiten!r}")
    rng = np.random.default_rng(random_state)
    pics = load_images(images)
    counts = np.full(len(pics), n // len(pics))
    counts[: n % len(pics)] += 1
    patches, labels = [], []
    for label, (image, count) in enumerate(zip(pics, counts, strict=True)):
        pool = _sample(image, 4 * int(count) + 16, size, rng)
        pool = pool - pool.mean(axis=1, keepdims=True)
        var = pool.var(axis=1)
        keep = pool[var > 0.01 * np.median(var)] if np.median(var) > 0 else pool
        if keep.shape[0] < count:
            keep = pool
        patches.append(keep[:count])
        labels.append(np.full(int(count), label))
    X = np.concatenate(patches)
    y = np.concatenate(labels)
    if whiten == "zca":
        X = ZCAWhitener().fit(X).transform(X)
    if normalize:
        X = X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)
    order = rng.permutation(X.shape[0])
    return (X[order], y[order]) if return_labels else X[order]


def gratings(
    n: int,
    size: int = 8,
    n_orientations: int = 4,
    *,
    random_state: int | np.random.Generator | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` sinusoidal gratings, ``(n, size**2)`` mean-free and unit-norm, with orientation labels.

    Orientations ``k pi / n_orientations``, spatial frequency uniform in 0.15-0.3 cycles per pixel,
    random phase; classes are balanced. A read-out task whose clean accuracy is far above chance
    (8x8 texture patches are not: every code reads their source texture near the majority rate).
    """
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if not isinstance(n_orientations, (int, np.integer)) or n_orientations < 2:
        raise ValueError(f"n_orientations must be an int >= 2, got {n_orientations!r}")
    rng = np.random.default_rng(random_state)
    y = np.arange(n) % n_orientations
    rng.shuffle(y)
    theta = np.pi * y / n_orientations
    freq = rng.uniform(0.15, 0.3, n)
    phase = rng.uniform(0, 2 * np.pi, n)
    v, u = np.mgrid[:size, :size].reshape(2, -1).astype(np.float64)
    X = np.cos(
        2 * np.pi * freq[:, None] * (np.cos(theta)[:, None] * u + np.sin(theta)[:, None] * v)
        + phase[:, None]
    )
    X -= X.mean(axis=1, keepdims=True)
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)
    return X, y


def degrade(
    X: np.ndarray,
    contrast: float = 1.0,
    noise: float = 0.0,
    random_state: int | np.random.Generator | None = None,
) -> np.ndarray:
    """``contrast * X + noise * xi / sqrt(d)``, ``xi`` standard normal: the degraded inputs.

    The noise is scaled by ``1 / sqrt(d)`` (``d`` features) so that ``noise`` is the noise-to-signal
    ratio of norms for unit-norm patches: ``noise = 1`` is noise as large as the clean patch.
    """
    if not np.isfinite(contrast) or contrast <= 0:
        raise ValueError(f"contrast must be > 0, got {contrast}")
    if not np.isfinite(noise) or noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    X = np.asarray(X)
    out = contrast * X
    if noise:
        xi = np.random.default_rng(random_state).standard_normal(X.shape)
        out = out + noise / np.sqrt(X.shape[-1]) * xi
    return out


def check_whitened(X: np.ndarray, *, mean_tol: float = 1.0, cond_tol: float = 5.0) -> None:
    """Warn when patches look neither centred nor whitened, naming the measured figures.

    The covariance condition number is compared with ``cond_tol`` times the Marchenko-Pastur bound
    ``((1 + sqrt(q)) / (1 - sqrt(q)))^2``, ``q = d / n``, that white data of this size reaches by
    chance; with ``n <= d`` samples only the mean is checked.
    """
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    if n < 2:
        return
    scale = np.sqrt((X**2).mean()) or 1.0
    mean = float(np.abs(X.mean(axis=0)).max() / scale)
    cond, bound = float("nan"), float("inf")
    if n > d:
        lam = np.linalg.eigvalsh(np.cov(X, rowvar=False).reshape(d, d))
        # directions with no variance at all (per-patch mean removal leaves one) are rank, not colour
        lam = lam[lam > 1e-8 * lam.max()] if lam.max() > 0 else lam
        cond = float(lam.max() / lam.min()) if lam.size and lam.min() > 0 else float("inf")
        q = d / n
        bound = cond_tol * ((1 + np.sqrt(q)) / (1 - np.sqrt(q))) ** 2
    if mean > mean_tol or cond > bound:
        warnings.warn(
            f"input patches do not look centred and whitened: max |column mean| = {mean:.3g} of "
            f"the RMS value (expected < {mean_tol}), covariance condition number = {cond:.3g} "
            f"(expected < {bound:.3g} for white data of this size). Pass whiten=True or whiten "
            "them (data.ZCAWhitener).",
            UserWarning,
            stacklevel=3,
        )
