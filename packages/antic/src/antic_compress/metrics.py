"""Evaluation of a compressed series: every frame reconstructed, errors, physics diagnostics."""

from __future__ import annotations

import itertools

import torch

from antic_compress.store import SnapshotStore

Tensor = torch.Tensor


def interpolate_frames(kept: list[int], snapshots: list[Tensor], n_frames: int) -> Tensor:
    """All ``n_frames`` frames, linearly interpolated in frame index between kept neighbours.

    ``kept`` are the kept frames' indices (increasing), ``snapshots`` their reconstructions;
    frames after the last kept one repeat it.
    """
    if not kept or len(kept) != len(snapshots):
        raise ValueError(
            f"need as many kept indices as snapshots, got {len(kept)} and {len(snapshots)}"
        )
    if any(b <= a for a, b in itertools.pairwise(kept)):
        raise ValueError("kept frame indices must increase")
    out = torch.empty((n_frames, *snapshots[0].shape), dtype=snapshots[0].dtype)
    for j, (a, b) in enumerate(itertools.pairwise(kept)):
        for i in range(a, min(b, n_frames)):
            w = (i - a) / (b - a)
            out[i] = (1 - w) * snapshots[j] + w * snapshots[j + 1]
    out[kept[-1] :] = snapshots[-1]
    out[: kept[0]] = snapshots[0]
    return out


def reconstruct_series(store: SnapshotStore, coords: Tensor, n_frames: int) -> Tensor:
    """Every frame of a stored run: decompressed snapshots, skipped frames interpolated in time."""
    snaps = [store.decompress_field(k, coords) for k in range(len(store))]
    order = sorted(range(len(store)), key=lambda k: store.records[k].frame)
    frames = [store.records[k].frame for k in order]
    # A frame can be stored twice (a selector's anchor kept again): keep the later snapshot.
    dedup: dict[int, Tensor] = {f: snaps[k] for f, k in zip(frames, order, strict=True)}
    kept = sorted(dedup)
    return interpolate_frames(kept, [dedup[f] for f in kept], n_frames)


def rel_l2_per_frame(recon: Tensor, truth: Tensor) -> Tensor:
    """``||recon_i - truth_i|| / ||truth_i||`` for every frame ``i`` (float64)."""
    d = (recon.to(torch.float64) - truth.to(torch.float64)).flatten(1).norm(dim=1)
    return d / truth.to(torch.float64).flatten(1).norm(dim=1).clamp_min(1e-300)


def enstrophy(frames: Tensor) -> Tensor:
    """``0.5 * mean(w^2)`` per frame of a ``(T, n, n)`` vorticity series."""
    return 0.5 * (frames.to(torch.float64) ** 2).flatten(1).mean(dim=1)


def energy_spectrum(w: Tensor) -> Tensor:
    """The shell-summed kinetic energy spectrum ``E(k)``, ``k = 0 .. n/2``, of a vorticity ``(n, n)``."""
    n = w.shape[-1]
    w_hat = torch.fft.fft2(w.to(torch.float64)) / (n * n)
    k = torch.fft.fftfreq(n, d=1.0 / n).to(torch.float64)
    k2 = k[:, None] ** 2 + k[None, :] ** 2
    e = 0.5 * w_hat.abs() ** 2 / torch.where(k2 > 0, k2, 1.0) * (k2 > 0)
    shells = torch.round(k2.sqrt()).long().clamp_max(n // 2)
    return torch.zeros(n // 2 + 1, dtype=torch.float64).index_add_(
        0, shells.reshape(-1), e.reshape(-1)
    )


def spectrum_error(recon: Tensor, truth: Tensor) -> float:
    """Mean over frames of the relative L2 error of ``log E(k)`` up to ``n/3`` (the resolved band)."""
    n = truth.shape[-1]
    kmax = n // 3
    errs = []
    for r, t in zip(recon, truth, strict=True):
        er, et = energy_spectrum(r)[1:kmax], energy_spectrum(t)[1:kmax]
        errs.append(float((er.log() - et.log()).norm() / et.log().norm()))
    return sum(errs) / len(errs)


def peak_capture(recon_curve: Tensor, truth_curve: Tensor, top: int = 5) -> float:
    """Mean relative error at the truth's ``top`` largest interior local maxima (e.g. bursts).

    NaN when the truth has no interior maximum (a monotone curve): there is no peak to capture, and
    a comparison on it would hold vacuously.
    """
    t = truth_curve.to(torch.float64)
    peaks = [i for i in range(1, len(t) - 1) if t[i] > t[i - 1] and t[i] >= t[i + 1]]
    if not peaks:
        return float("nan")
    peaks = sorted(peaks, key=lambda i: -float(t[i]))[:top]
    errors = [
        abs(float(recon_curve[i]) - float(t[i])) / max(abs(float(t[i])), 1e-300) for i in peaks
    ]
    return sum(errors) / len(errors)
