"""Reproduce ANTIC's claims at CPU scale: ``python -m antic_compress.reproduce [--smoke|--quick|--full]``.

Three studies on generated data (nothing downloaded):

1. *Temporal*: the physics-aware selectors against uniform (and random) picks of the same number of
   frames over the same span, on exact frames, so only the temporal choice differs: forced
   Kolmogorov flow, decaying turbulence, KdV soliton collisions and a bursty regime-switch series
   (several seeds each). Skipped frames are interpolated linearly in time. A claim holds only by a
   strict paired margin (> 2 s.e.), is n/a below a temporal CR of 1.5, and a keep-all selector (the
   negative control) must not hold.
2. *Spatial*: the streaming loop on one Kolmogorov run with {LoRA r_a, LoRA r_b, full FT, scratch}
   (and the uniform selector with LoRA), reporting temporal/spatial/total CR, the per-snapshot and
   the all-frames rel-L2, the enstrophy-curve and energy-spectrum errors.
3. *Classical*: SZ3 and ZFP on the same frames at the neural field's rel-L2.
"""

from __future__ import annotations

import math
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from antic_compress.compressor import NeuralFieldCompressor
from antic_compress.data import grid_coords, kdv_soliton, kolmogorov_flow
from antic_compress.fields import MLPPlus
from antic_compress.metrics import (
    enstrophy,
    interpolate_frames,
    peak_capture,
    reconstruct_series,
    rel_l2_per_frame,
    spectrum_error,
)
from antic_compress.selectors import (
    EnstrophySelector,
    QuantileActivitySelector,
    SurgeSelector,
    TemporalSelector,
    UniformSelector,
    kdv_activity,
)
from antic_compress.store import SnapshotStore
from antic_compress.streaming import ANTIC
from shared_core.cli import ReproduceArgs, progress, reproduce_main
from shared_core.report import Claim, Report

Tensor = torch.Tensor
KDV_LENGTH = 50.0


def settings_for(args: ReproduceArgs) -> dict[str, Any]:
    """Every number of the run (recorded in the report)."""
    return args.pick(
        smoke=dict(
            n=16,
            T=0.4,
            save_every=0.05,
            spinup=0.1,
            nu=5e-3,
            temporal_n=16,
            temporal_T=1.0,
            temporal_nu=5e-3,
            temporal_spinup=0.0,
            seeds=3,
            hidden=8,
            layers=2,
            fourier=8,
            ranks=[2, 4],
            initial_epochs=10,
            subsequent_epochs=2,
            batch=64,
            lr=5e-3,
            reset=4,
            kdv_n=64,
            kdv_T=1.0,
            burst_frames=40,
            uniform_arm=False,
            match_frames=3,
        ),
        quick=dict(
            n=128,
            T=0.5,
            save_every=0.05,
            spinup=2.0,
            # 5x the spec's viscosity: at 1e-3 a 4,481-parameter field (the largest that still
            # compresses 128^2) stops at 0.2-0.3 keyframe / 0.3-0.5 snapshot rel-L2 (README)
            nu=5e-3,
            temporal_n=32,
            temporal_T=40.0,
            temporal_nu=2e-3,
            temporal_spinup=0.0,
            seeds=3,
            hidden=32,
            layers=3,
            fourier=64,
            ranks=[4, 8],
            initial_epochs=300,
            subsequent_epochs=20,
            batch=2048,
            lr=5e-3,
            reset=10,
            kdv_n=256,
            kdv_T=10.0,
            burst_frames=400,
            uniform_arm=False,
            match_frames=5,
        ),
        full=dict(
            n=128,
            T=20.0,
            save_every=0.025,
            spinup=2.0,
            nu=1e-3,
            temporal_n=64,
            temporal_T=60.0,
            temporal_nu=1e-3,
            temporal_spinup=0.0,
            seeds=3,
            hidden=32,
            layers=3,
            fourier=64,
            ranks=[4, 8],
            initial_epochs=200,
            subsequent_epochs=20,
            batch=4096,
            lr=5e-3,
            reset=50,
            kdv_n=256,
            kdv_T=10.0,
            burst_frames=800,
            uniform_arm=True,
            match_frames=10,
        ),
    )


# -- data ---------------------------------------------------------------------------------------
def kolmogorov_series(
    s: dict[str, Any], seed: int, forcing: str | None = "kolmogorov", temporal: bool = False
) -> tuple[list[float], Tensor]:
    """Forced (after ``spinup``) or decaying (from t = 0) frames of the spatial or temporal study."""
    drag = 0.1 if forcing else 0.0
    spin = (s["temporal_spinup"] if temporal else s["spinup"]) if forcing else 0.0
    n, T, nu = (
        (s["temporal_n"], s["temporal_T"], s["temporal_nu"])
        if temporal
        else (s["n"], s["T"], s["nu"])
    )
    flow = kolmogorov_flow(
        n=n,
        T=T,
        save_every=s["save_every"],
        forcing=forcing,
        nu=nu,
        drag=drag,
        seed=seed,
        spinup=spin,
    )
    frames = list(flow)
    return [t for t, _ in frames], torch.stack([f for _, f in frames])


def kdv_series(s: dict[str, Any], seed: int) -> Tensor:
    """Two colliding solitons at seeded positions (the fast one overtakes the slow one)."""
    g = torch.Generator().manual_seed(seed)
    shift = (torch.rand(2, generator=g) * 5).tolist()
    flow = kdv_soliton(
        n=s["kdv_n"],
        T=s["kdv_T"],
        save_every=0.02,
        length=KDV_LENGTH,
        positions=(10.0 + shift[0], 25.0 + shift[1]),
    )
    return torch.stack([u for _, u in flow])


def bursty_series(s: dict[str, Any], seed: int) -> Tensor:
    """A slowly drifting field with rare short bursts (a localised pulse for a few frames)."""
    g = torch.Generator().manual_seed(seed)
    n, count = 32, s["burst_frames"]
    x = grid_coords(n).reshape(n, n, 2)
    base = torch.sin(x[..., 0]) * torch.cos(x[..., 1])
    frames = []
    starts = set(torch.randperm(count - 10, generator=g)[: max(2, count // 60)].tolist())
    pulse_at = {}
    for st in starts:
        centre = torch.rand(2, generator=g) * 6
        for j in range(6):
            pulse_at[st + j] = (centre, math.sin(math.pi * (j + 0.5) / 6))
    for i in range(count):
        f = base * (1 + 0.1 * math.sin(2 * math.pi * i / count))
        if i in pulse_at:
            centre, amp = pulse_at[i]
            f = f + 4 * amp * torch.exp(-(((x - centre) ** 2).sum(-1)) / 0.3)
        frames.append(f)
    return torch.stack(frames).to(torch.float32)


# -- study 1: temporal selection on exact frames -------------------------------------------------
def kept_indices(selector: TemporalSelector, frames: Tensor) -> list[int]:
    for f in frames:
        selector.decide(f)
    return sorted(set(selector.selected_indices))


def amplitude(frames: Tensor) -> Tensor:
    """``max |f|`` per frame: the activity curve of the KdV and bursty series."""
    return frames.to(torch.float64).flatten(1).abs().max(dim=1).values


def interp_scores(
    frames: Tensor, kept: list[int], last: int, curve: Callable[[Tensor], Tensor] = enstrophy
) -> dict[str, float]:
    """Errors of the series rebuilt from the kept exact frames; ``curve`` is the activity diagnostic."""
    recon = interpolate_frames(kept, [frames[i] for i in kept], len(frames))[: last + 1]
    truth = frames[: last + 1]
    err = rel_l2_per_frame(recon, truth)
    curve_t, curve_r = curve(truth), curve(recon)
    return {
        "mean_rel_l2": float(err.mean()),
        "max_rel_l2": float(err.max()),
        "peak_error": peak_capture(curve_r, curve_t),
        "curve_max_error": float(((curve_r - curve_t).abs() / curve_t.abs().max()).max()),
    }


class KeepAll(TemporalSelector):
    """Keeps every frame: the negative control (a uniform selector of the same count is identical)."""

    def _decide(self, frame: Tensor) -> bool:
        return self._keep_current(frame)


def compare_selectors(
    frames: Tensor,
    make: Callable[[], TemporalSelector],
    seed: int,
    curve: Callable[[Tensor], Tensor] = enstrophy,
) -> dict[str, Any]:
    """The method against uniform and random picks of the SAME number of frames over the SAME span.

    The span runs from frame 0 to the method's last kept frame (later frames would need
    extrapolation); the uniform and random picks keep both ends of it and as many frames in all
    as the method, so only where the frames fall differs.
    """
    ours = kept_indices(make(), frames)
    last, count = ours[-1], len(ours)
    uniform = kept_indices(UniformSelector.matching(count, last + 1), frames[: last + 1])
    g = torch.Generator().manual_seed(seed)
    randoms = [
        sorted(
            {
                0,
                last,
                *torch.randperm(max(last - 1, 0), generator=g)[: max(count - 2, 0)].add(1).tolist(),
            }
        )
        for _ in range(5)
    ]
    assert uniform[-1] == last and len(uniform) == count
    rand_scores = [interp_scores(frames, r, last, curve) for r in randoms]
    return {
        "kept": count,
        "frames": len(frames),
        "span": last + 1,
        "temporal_cr": len(frames) / count,
        "pats": interp_scores(frames, ours, last, curve),
        "uniform": interp_scores(frames, uniform, last, curve),
        "random": {k: sum(r[k] for r in rand_scores) / len(rand_scores) for k in rand_scores[0]},
    }


def temporal_study(s: dict[str, Any], seed: int) -> dict[str, Any]:
    def enstrophy_selector() -> TemporalSelector:
        return EnstrophySelector(window_size=5)

    out: dict[str, Any] = {"kolmogorov": [], "decaying": [], "keep-all (control)": []}
    for i in progress(range(s["seeds"]), desc="temporal: forced and decaying turbulence seeds"):
        _, frames = kolmogorov_series(s, seed + 42 + i, temporal=True)
        out["kolmogorov"].append(compare_selectors(frames, enstrophy_selector, seed + i))
        out["keep-all (control)"].append(compare_selectors(frames, KeepAll, seed + i))
        _, frames = kolmogorov_series(s, seed + 42 + i, forcing=None, temporal=True)
        out["decaying"].append(compare_selectors(frames, enstrophy_selector, seed + i))

    def quantile() -> TemporalSelector:
        return QuantileActivitySelector(activity=kdv_activity(KDV_LENGTH))

    out["kdv"] = [
        compare_selectors(kdv_series(s, seed + i), quantile, seed + i, amplitude)
        for i in range(s["seeds"])
    ]
    out["bursty"] = [
        compare_selectors(
            bursty_series(s, seed + i), lambda: SurgeSelector(history_len=20), seed + i, amplitude
        )
        for i in range(s["seeds"])
    ]
    return out


# -- study 2: the streaming loop with each adapter -------------------------------------------------
def antic_arm(
    s: dict[str, Any],
    times: list[float],
    frames: Tensor,
    adapter: str,
    rank: int,
    selector: TemporalSelector,
    seed: int,
) -> dict[str, Any]:
    coords = grid_coords(s["n"])
    model = MLPPlus(
        in_dim=2,
        out_dim=1,
        hidden=s["hidden"],
        layers=s["layers"],
        fourier_dim=s["fourier"],
        fourier_scale=7.0,
        seed=seed,
    )
    with tempfile.TemporaryDirectory() as tmp:
        run = ANTIC(
            selector,
            NeuralFieldCompressor(model),
            coords,
            tmp,
            initial_epochs=s["initial_epochs"],
            subsequent_epochs=s["subsequent_epochs"],
            lr=s["lr"],
            batch_size=s["batch"],
            adapter=adapter,  # type: ignore[arg-type]
            lora_rank=rank,
            reset_every_n=s["reset"],
            seed=seed,
        )
        start = time.perf_counter()
        records = run.run(zip(times, frames, strict=True))
        seconds = time.perf_counter() - start
        recon = reconstruct_series(SnapshotStore(tmp), coords, len(frames))
        kept = [r.frame for r in records]
        last = max(kept)
        err = rel_l2_per_frame(recon[: last + 1], frames[: last + 1])
        stats = run.stats()
        mids = [
            kept[j]
            for j in torch.linspace(0, len(kept) - 1, s["match_frames"]).round().long().tolist()
        ]
        return {
            **stats,
            "snapshot_rel_l2": [r.rel_l2 for r in records[1:]],  # after the shared first keyframe
            "frames_kept": kept,
            "series_mean_rel_l2": float(err.mean()),
            "series_max_rel_l2": float(err.max()),
            "enstrophy_curve_error": float(
                (
                    (enstrophy(recon[: last + 1]) - enstrophy(frames[: last + 1])).abs()
                    / enstrophy(frames).max()
                ).max()
            ),
            "spectrum_error": spectrum_error(recon[: last + 1 : 4], frames[: last + 1 : 4]),
            "n_params_key": records[0].n_params,
            "n_params_delta": next((r.n_params for r in records if r.kind == "delta"), 0),
            "seconds_per_snapshot": seconds / len(records),
            "match": [
                (i, float(rel_l2_per_frame(recon[i : i + 1], frames[i : i + 1])[0])) for i in mids
            ],
        }


def spatial_study(s: dict[str, Any], seed: int) -> dict[str, Any]:
    times, frames = kolmogorov_series(s, seed + 42)
    ra, rb = s["ranks"]
    arms: list[tuple[str, str, int, Callable[[], TemporalSelector]]] = [
        (f"lora r={ra}", "lora", ra, lambda: EnstrophySelector(window_size=5)),
        (f"lora r={rb}", "lora", rb, lambda: EnstrophySelector(window_size=5)),
        ("full FT", "full", rb, lambda: EnstrophySelector(window_size=5)),
        ("scratch", "scratch", rb, lambda: EnstrophySelector(window_size=5)),
    ]
    out: dict[str, Any] = {}
    for name, adapter, rank, make in progress(arms, desc="spatial: ANTIC arms"):
        out[name] = antic_arm(s, times, frames, adapter, rank, make(), seed)
    if s["uniform_arm"]:
        kept = int(out[f"lora r={rb}"]["snapshots"])
        out[f"uniform + lora r={rb}"] = antic_arm(
            s, times, frames, "lora", rb, UniformSelector.matching(kept, len(frames)), seed
        )
    return out


# -- study 3: the classical compressors at the neural field's error --------------------------------
def classical_study(s: dict[str, Any], seed: int, arm: dict[str, Any]) -> dict[str, Any]:
    from antic_compress.baselines import match_rel_l2, sz3_compress, zfp_compress

    _, frames = kolmogorov_series(s, seed + 42)
    rows = []
    for i, target in arm["match"]:
        x = frames[i].numpy()
        span = float(abs(x).max())
        row: dict[str, Any] = {"frame": i, "nf_rel_l2": target}
        for name, fn in (("sz3", sz3_compress), ("zfp", zfp_compress)):
            bound, out = match_rel_l2(fn, x, target, span * 1e-7, span)
            start = time.perf_counter()
            fn(x, bound)
            row[f"{name}_cr"] = out.ratio
            row[f"{name}_seconds"] = time.perf_counter() - start
        rows.append(row)
    return {"rows": rows}


# -- claims, tables, figures ---------------------------------------------------------------------
def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


MIN_TEMPORAL_CR = 1.5  # below it a selector keeps nearly everything: its comparison says nothing


def paired_claim(
    report: Report,
    name: str,
    metric: str,
    rows: Sequence[dict[str, Any]],
    key: str,
    arm: str = "pats",
    base: str = "uniform",
    baseline_name: str = "uniform, same count and span",
    min_cr: float | None = MIN_TEMPORAL_CR,
    note: str = "",
) -> Claim:
    """``arm`` below ``base`` on ``key`` by a strict margin: mean paired gap > 2 s.e. and > 0.

    Ties never hold. With ``min_cr``, the claim is n/a when the arm's mean temporal CR is below it.
    """
    ours = [float(r[arm][key]) for r in rows]
    theirs = [float(r[base][key]) for r in rows]
    gaps = [b - a for a, b in zip(ours, theirs, strict=True)]
    gap = _mean(gaps)
    se = statistics.stdev(gaps) / math.sqrt(len(gaps)) if len(gaps) > 1 else math.inf
    cr = _mean([r["temporal_cr"] for r in rows])
    na = ""
    if min_cr is not None and cr < min_cr:
        na = f"temporal CR {cr:.2f} < {min_cr}: the selector keeps nearly every frame"
    claim = Claim(
        name=name,
        metric=metric,
        ours=_mean(ours),
        baseline=_mean(theirs),
        direction="lower",
        baseline_name=baseline_name,
        held=gap > 0 and gap > 2 * se,
        note=f"paired gap {gap:.3g} +- {se:.2g} (s.e.), held iff > 2 s.e.; temporal CR {cr:.2f}"
        + (f"; {note}" if note else ""),
        samples=len(rows),
        na=na,
    )
    report.claims.append(claim)
    return claim


def temporal_claims(report: Report, temporal: dict[str, Any]) -> None:
    for regime, label, keys in (
        ("kolmogorov", "forced Kolmogorov", ("mean_rel_l2", "max_rel_l2")),
        ("decaying", "decaying turbulence", ("mean_rel_l2", "max_rel_l2")),
        ("kdv", "KdV soliton collision", ("max_rel_l2", "peak_error")),
        ("bursty", "bursty regime switches", ("max_rel_l2", "peak_error")),
    ):
        for key in keys:
            what = {
                "mean_rel_l2": ("mean error", "mean rel-L2, interpolated"),
                "max_rel_l2": ("max error", "max rel-L2 over frames"),
                "peak_error": ("activity-peak error", "peak error of the activity curve"),
            }[key]
            paired_claim(
                report, f"PATS {what[0]} < uniform ({label})", what[1], temporal[regime], key
            )
    paired_claim(
        report,
        "negative control: keep-all < uniform at the same count (must not hold)",
        "mean rel-L2, interpolated",
        temporal["keep-all (control)"],
        "mean_rel_l2",
        arm="pats",
        min_cr=None,
        note="keeping every frame, the uniform pick of the same count is the same frames: a tie",
    )
    ctrl = temporal["kolmogorov"] + temporal["decaying"]
    paired_claim(
        report,
        "control: uniform < random frames at the same count and span",
        "mean rel-L2, interpolated",
        ctrl,
        "mean_rel_l2",
        arm="uniform",
        base="random",
        baseline_name="random frames, same count and span",
        min_cr=None,
        note="if this failed, equal-count comparisons could not tell selections apart",
    )


def mlp_plus_parameters(in_dim: int, out_dim: int, hidden: int, layers: int, fourier: int) -> int:
    """MLP+'s parameter count from its architecture (the prediction side of the CR claim).

    Fourier matrix, first Linear, ``layers - 1`` hidden Linears, ``layers`` LayerNorms, output.
    """
    return (
        in_dim * fourier // 2
        + (fourier + 1) * hidden
        + (layers - 1) * (hidden + 1) * hidden
        + layers * 2 * hidden
        + (hidden + 1) * out_dim
    )


def lora_parameters(hidden: int, layers: int, fourier: int, rank: int) -> int:
    """LoRA factors ``A (in, r)`` and ``B (r, out)`` on MLP+'s ``layers`` hidden Linears."""
    return rank * (fourier + hidden) + (layers - 1) * rank * 2 * hidden


def predicted_spatial_cr(s: dict[str, Any], kept: int, rank: int) -> tuple[float, int]:
    """Kept frames' float32 values over the predicted parameters, and the predicted keyframes.

    A keyframe is the first snapshot and every ``reset``-th selection: ``1 + kept // reset``.
    """
    keys = 1 + kept // s["reset"] if s["reset"] > 1 else kept
    full = mlp_plus_parameters(2, 1, s["hidden"], s["layers"], s["fourier"])
    delta = lora_parameters(s["hidden"], s["layers"], s["fourier"], rank)
    return kept * s["n"] ** 2 / (keys * full + (kept - keys) * delta), keys


def spatial_claims(report: Report, s: dict[str, Any], spatial: dict[str, Any]) -> None:
    full, scratch = spatial["full FT"], spatial["scratch"]
    pairs = len(full["snapshot_rel_l2"])
    report.claim(
        "warm-started FT >= 2x below scratch at equal epochs",
        "2 x mean snapshot rel-L2 (FT) vs scratch",
        2 * _mean(full["snapshot_rel_l2"]),
        _mean(scratch["snapshot_rel_l2"]),
        direction="lower",
        baseline_name="scratch, same epochs",
        samples=pairs,
        note=f"FT {_mean(full['snapshot_rel_l2']):.3g} vs scratch {_mean(scratch['snapshot_rel_l2']):.3g}; "
        f"pilot 0.23 vs 0.79; samples are paired snapshots of one run",
    )
    rb = s["ranks"][1]
    lora = spatial[f"lora r={rb}"]
    kept = int(lora["snapshots"])
    predicted, keys = predicted_spatial_cr(s, kept, rb)
    report.claim(
        f"LoRA r={rb} spatial CR from bytes on disk = the architecture's parameter ratio",
        "spatial CR: raw bytes / every byte the store wrote",
        lora["spatial_cr_bytes"],
        predicted,
        direction="close",
        tolerance=0.1 * predicted,
        baseline_name="closed form N*F*kept / (K*P_full + (kept-K)*P_lora), K = 1 + kept//reset",
        samples=kept,
        note=f"P_full = {mlp_plus_parameters(2, 1, s['hidden'], s['layers'], s['fourier'])}, "
        f"P_lora = {lora_parameters(s['hidden'], s['layers'], s['fourier'], rb)} from the "
        f"architecture, K = {keys} predicted ({int(lora['keyframes'])} stored); the bytes add "
        "safetensors headers, normaliser stats and store.json (tolerance 10 %)",
    )
    report.claim(
        f"LoRA r={rb} error within 2x of full FT",
        "mean snapshot rel-L2",
        _mean(lora["snapshot_rel_l2"]),
        2 * _mean(full["snapshot_rel_l2"]),
        direction="lower",
        baseline_name="2 x full FT",
        samples=pairs,
        note="paper: LoRA 6.82e-4 vs FT 6.14e-4 (1.1x)",
    )


def classical_claims(
    report: Report, spatial: dict[str, Any], classical: dict[str, Any], s: dict[str, Any]
) -> None:
    rb = s["ranks"][1]
    rows = classical["rows"]
    lora = spatial[f"lora r={rb}"]
    sz3 = _mean([r["sz3_cr"] for r in rows])
    report.claim(
        "SZ3 beats the neural field spatially on 2-D (the paper's own table)",
        "spatial CR at matched rel-L2",
        sz3,
        lora["spatial_cr"],
        direction="higher",
        baseline_name=f"ANTIC LoRA r={rb} spatial CR",
        samples=len(rows),
        note="paper: SZ3 154x vs LoRA 47x on 2-D Kolmogorov",
    )
    report.claim(
        "ANTIC total CR beats SZ3 per frame at matched rel-L2",
        "total CR (temporal x spatial)",
        lora["total_cr"],
        sz3,
        direction="higher",
        baseline_name="SZ3 per frame",
        samples=len(rows),
        note="the paper's headline (~435x on 2-D) rests on a GPU-scale field; SZ3 is matched to the "
        "snapshot error, skipped frames make ANTIC's series error larger (see the table)",
    )


def tables(
    report: Report, temporal: dict[str, Any], spatial: dict[str, Any], classical: dict[str, Any]
) -> None:
    rows = []
    for regime, runs in temporal.items():
        for arm in ("pats", "uniform", "random"):
            rows.append(
                {
                    "series": regime,
                    "selector": arm,
                    "temporal CR": _mean([r["temporal_cr"] for r in runs]),
                    **{k: _mean([r[arm][k] for r in runs]) for k in runs[0][arm]},
                }
            )
    report.table("temporal selection on exact frames (mean over seeds)", rows)
    report.table(
        "ANTIC arms (one forced Kolmogorov run)",
        [
            {
                "arm": name,
                "temporal CR": a["temporal_cr"],
                "spatial CR": a["spatial_cr"],
                "spatial CR (bytes)": a["spatial_cr_bytes"],
                "total CR": a["total_cr"],
                "snapshot rel-L2": _mean(a["snapshot_rel_l2"]),
                "series mean rel-L2": a["series_mean_rel_l2"],
                "series max rel-L2": a["series_max_rel_l2"],
                "enstrophy curve err": a["enstrophy_curve_error"],
                "spectrum err": a["spectrum_error"],
                "s/snapshot": a["seconds_per_snapshot"],
            }
            for name, a in spatial.items()
        ],
    )
    report.table("SZ3 and ZFP at the neural field's rel-L2 (same frames)", classical["rows"])


def figures(report: Report, temporal: dict[str, Any], spatial: dict[str, Any]) -> None:
    from shared_core.report import subplots

    fig, ax = subplots(figsize=(6, 3.5))
    names = list(temporal)
    for j, arm in enumerate(("pats", "uniform", "random")):
        ax.bar(
            [i + 0.27 * (j - 1) for i in range(len(names))],
            [_mean([r[arm]["max_rel_l2"] for r in temporal[n]]) for n in names],
            width=0.27,
            label=arm,
        )
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("max rel-L2 (interpolated)")
    ax.legend()
    report.figure("temporal_max_error", fig, "max interpolation error at equal budget")
    fig, ax = subplots(figsize=(6, 3.5))
    for name, a in spatial.items():
        ax.plot(a["frames_kept"][1:], a["snapshot_rel_l2"], label=name, lw=1)
    ax.set_yscale("log")
    ax.set_xlabel("frame")
    ax.set_ylabel("snapshot rel-L2")
    ax.legend(fontsize=7)
    report.figure("snapshot_error", fig, "per-snapshot error of each arm")


def run(args: ReproduceArgs) -> Report:
    torch.set_num_threads(1)
    s = settings_for(args)
    report = Report(
        "antic-compress",
        "ANTIC: Adaptive Neural Temporal In-situ Compressor (CPU scale)",
        args.out,
        {
            "size": args.size,
            "seed": args.seed,
            **{k: v for k, v in s.items() if k != "ranks"},
            "ranks": str(s["ranks"]),
        },
    )
    temporal = report.cached("temporal", lambda: temporal_study(s, args.seed))
    spatial = report.cached("spatial", lambda: spatial_study(s, args.seed))
    classical = report.cached(
        "classical", lambda: classical_study(s, args.seed, spatial[f"lora r={s['ranks'][1]}"])
    )
    spatial_claims(report, s, spatial)
    classical_claims(report, spatial, classical, s)
    temporal_claims(report, temporal)
    tables(report, temporal, spatial, classical)
    figures(report, temporal, spatial)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    return reproduce_main(run, argv, description=__doc__ or "")


if __name__ == "__main__":
    raise SystemExit(main())
