"""Reproduce AdaSCALE's claims at CPU scale: ``python -m adascale.reproduce [--smoke|--quick|--full]``.

ID = eight procedural shape/texture classes (32x32); near-OOD = two unseen shapes that deform an ID
shape (an ellipse, a stretched disk; a diamond, a square turned 45 degrees); far-OOD = scikit-image
photo/texture crops and noise (:mod:`adascale.shapes`). The classifiers are BatchNorm ResNets with a
4x4 final map and D >= 512 ReLU'd features, trained here (:mod:`adascale.fixture`; the weights are
cached in the report's checkpoints, nothing is shipped), of several depths and widths.

1. **Gate and search** (classifier seed 0, validation data only): the AUROC of ``Q``, ``C_o`` and
   ``Q'`` as OOD scores for every perturbation setting tried (``eps``, ``o``, ``k1/k2``, ``lam`` up
   to 1e4); the best setting on near-OOD validation is kept.
2. **Comparison** on fresh classifiers (other seeds, depths, widths) and fresh data: Energy, ReAct,
   ASH-S, SCALE, LTS, OptFS, AdaSCALE-A/L, each method's percentile chosen on the OOD validation
   split (OpenOOD's APS), never on test. A claim holds only beyond 2 paired standard errors over
   the classifiers. Negative controls: AdaSCALE-A with its per-sample percentiles shuffled across
   the test samples (adaptive, uninformed; must not beat SCALE), ``Q'`` without the perturbation
   (``eps = 0``), a random scorer.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from adascale import fixture, shapes
from adascale import functional as F
from adascale.baselines import ASH, LTS, SCALE, Energy, OptFS, ReAct
from adascale.detector import AdaSCALE
from adascale.fixture import Recipe, decode_state, trained_entry
from adascale.metrics import auroc, fpr_at_tpr
from shared_core.cli import ReproduceArgs, progress, reproduce_main
from shared_core.report import Report

P_SWEEP = [65, 70, 75, 80, 85, 90, 95]
ADA_SWEEP = [65, 70, 75, 80, 85, 90, 95, 99]
REACT_SWEEP = [85, 90, 95, 99]
METHODS = ("Energy", "ReAct", "ASH-S", "SCALE", "LTS", "OptFS", "AdaSCALE-A", "AdaSCALE-L")
SHUFFLED = "AdaSCALE-A, shuffled p (control)"
CONTROLS = ("random (control)", SHUFFLED)
#: the smoke run's classifier: seconds to train, far too small to test anything
SMOKE = Recipe(widths=(4, 8, 8), feature_dim=128, n_per_class=12, epochs=1, batch_size=32)
#: the comparison's classifiers: other seeds than the search's, two depths, three widths
BACKBONES = (
    Recipe(seed=1),
    Recipe(seed=2),
    Recipe(seed=3, depth=2),
    Recipe(seed=4, feature_dim=1024),
    Recipe(seed=5, depth=2, feature_dim=768),
)
MORE_BACKBONES = tuple(
    dataclasses.replace(r, seed=r.seed + 5) for r in BACKBONES
)  # --full: ten classifiers


def sizes(args: ReproduceArgs) -> dict[str, Any]:
    return {
        "fit": args.pick(smoke=64, quick=400, full=2000),
        "id": args.pick(smoke=32, quick=400, full=2000),  # per split (val, test), over 8 classes
        "ood": args.pick(smoke=16, quick=200, full=1000),  # per near/far split
        "probe": args.pick(smoke=8, quick=80, full=300),  # per unseen class
        "search": args.pick(smoke=SMOKE, quick=Recipe(seed=0), full=Recipe(seed=0)),
        "backbones": args.pick(
            smoke=[dataclasses.replace(SMOKE, seed=1)],
            quick=list(BACKBONES),
            full=list(BACKBONES + MORE_BACKBONES),
        ),
        "grid": args.pick(
            smoke=[(0.5, 0.05)],
            quick=[(0.5, 0.05), (2.0, 0.05), (0.5, 0.2), (1.0, 0.2)],
            full=list(itertools.product([0.25, 0.5, 1.0, 2.0], [0.05, 0.2, 0.5])),
        ),
        "stat_grid": [
            (0.01, 0.05, 10.0),
            (0.01, 0.05, 100.0),
            (0.01, 0.05, 1e3),
            (0.01, 0.05, 1e4),
            (0.05, 0.3, 1e3),
            (0.05, 0.3, 1e4),
        ],
    }


@functools.lru_cache(maxsize=8)
def datasets(seed: int, n_fit: int, n_id: int, n_ood: int) -> dict[str, torch.Tensor]:
    """Fit, validation and test inputs (normalised), fresh per seed."""
    per = max(1, n_id // len(shapes.ID_CLASSES))
    per_near = max(1, n_ood // len(shapes.NEAR_CLASSES))
    base = 1_000_000 + 1000 * seed
    out = {"fit": shapes.shapes(shapes.ID_CLASSES, max(1, n_fit // 8), base)[0]}
    for i, split in enumerate(("val", "test")):
        out[f"id_{split}"] = shapes.shapes(shapes.ID_CLASSES, per, base + 10 + i)[0]
        out[f"near_{split}"] = shapes.shapes(shapes.NEAR_CLASSES, per_near, base + 20 + i)[0]
        out[f"far_{split}"] = shapes.far_ood(n_ood, base + 30 + i)
    return {k: torch.from_numpy(shapes.normalise(v)) for k, v in out.items()}


def extract(model: Any, data: dict[str, torch.Tensor], eps: float, o: float) -> dict:
    """``(z, z~)`` for every split under one perturbation setting (batches of 200)."""
    det = AdaSCALE(model.features, model.fc, eps=eps, o=o, n_fit=None)
    out = {}
    for name, x in data.items():
        parts = [det.extract(x[i : i + 200]) for i in range(0, len(x), 200)]
        out[name] = tuple(torch.cat(cols) for cols in zip(*parts, strict=True))
    return out


def _ood_auroc(stat: dict[str, torch.Tensor], split: str, kind: str) -> float:
    # Q' and its parts are OOD-ness: the ID score is minus them.
    return auroc(-stat[f"id_{split}"], -stat[f"{kind}_{split}"])


def statistics(feats: dict, k1: float, k2: float, lam: float) -> dict[str, dict[str, torch.Tensor]]:
    """``Q``, ``C_o`` and ``Q'`` per split."""
    out: dict[str, dict[str, torch.Tensor]] = {"Q": {}, "C_o": {}, "Q'": {}}
    for name, (z, zt) in feats.items():
        q, c = F.shift_terms(z, zt, k1=k1, k2=k2)
        out["Q"][name], out["C_o"][name], out["Q'"][name] = q, c, lam * q + c
    return out


def gate_row(feats: dict, split: str, k1: float, k2: float, lam: float) -> dict[str, float]:
    stats = statistics(feats, k1, k2, lam)
    row = {}
    for kind in ("near", "far"):
        for name in ("Q", "C_o", "Q'"):
            row[f"AUROC({name}) {kind}"] = _ood_auroc(stats[name], split, kind)
    return row


def search(model: torch.nn.Module, data: dict, grid: list, stat_grid: list) -> list[dict]:
    """Every setting tried on the search classifier's validation split."""
    rows = []
    for eps, o in progress(grid, desc="search (eps, o)"):
        feats = extract(model, {k: v for k, v in data.items() if k.endswith("val")}, eps, o)
        for k1, k2, lam in stat_grid:
            row = {"eps": eps, "o": o, "k1": k1, "k2": k2, "lam": lam}
            rows.append({**row, **gate_row(feats, "val", k1, k2, lam)})
    return rows


def _detectors(model: Any, setting: dict) -> dict[str, Any]:
    b, h = model.features, model.fc
    kw = {k: setting[k] for k in ("k1", "k2", "lam", "eps", "o")}
    return {
        "Energy": (Energy(b, h), {}),
        "ReAct": (ReAct(b, h, n_fit=None), {"percentile": REACT_SWEEP}),
        "ASH-S": (ASH(b, h, variant="S"), {"percentile": P_SWEEP}),
        "SCALE": (SCALE(b, h), {"percentile": P_SWEEP}),
        "LTS": (LTS(b, h), {"percentile": P_SWEEP}),
        "OptFS": (OptFS(b, h, n_fit=None), {}),
        "AdaSCALE-A": (AdaSCALE(b, h, variant="A", n_fit=None, **kw), {"p_max": ADA_SWEEP}),
        "AdaSCALE-L": (AdaSCALE(b, h, variant="L", n_fit=None, **kw), {"p_max": ADA_SWEEP}),
    }


def _scores(det: Any, feats: tuple) -> torch.Tensor:
    with torch.no_grad():
        return det.score_features(*(feats if isinstance(det, AdaSCALE) else feats[:1]))


def _metrics(scores: dict[str, torch.Tensor], split: str) -> dict[str, float]:
    s_id = scores[f"id_{split}"]
    out = {}
    for kind in ("near", "far"):
        out[f"{kind} FPR@95"] = fpr_at_tpr(s_id, scores[f"{kind}_{split}"])
        out[f"{kind} AUROC"] = auroc(s_id, scores[f"{kind}_{split}"])
    return out


def _aps(det: Any, grid: dict, feats: dict) -> dict:
    """The grid point with the best mean validation AUROC (near and far), set on ``det``."""
    best, best_value = {}, -math.inf
    keys = list(grid)
    for values in itertools.product(*(grid[k] for k in keys)):
        point = dict(zip(keys, values, strict=True))
        for k, v in point.items():
            setattr(det, k, v)
        m = _metrics({n: _scores(det, feats[n]) for n in feats if n.endswith("val")}, "val")
        value = (m["near AUROC"] + m["far AUROC"]) / 2
        if value > best_value:
            best, best_value = point, value
    for k, v in best.items():
        setattr(det, k, v)
    return best


def compare(model: torch.nn.Module, data: dict, setting: dict, seed: int) -> dict[str, Any]:
    """Every method (hyper-parameters by APS on validation) and the controls on the test split."""
    feats = extract(model, data, setting["eps"], setting["o"])
    fit = feats.pop("fit")
    results, chosen = {}, {}
    detectors = _detectors(model, setting)
    for name, (det, grid) in detectors.items():
        if isinstance(det, AdaSCALE):
            det.fit_features(*fit)
        elif hasattr(det, "fit_features"):
            det.fit_features(fit[0])
        chosen[name] = _aps(det, grid, feats)
        results[name] = _metrics({n: _scores(det, f) for n, f in feats.items()}, "test")
    results.update(_controls(detectors["AdaSCALE-A"][0], feats, seed))
    stats = statistics(feats, setting["k1"], setting["k2"], setting["lam"])
    no_pert = statistics(
        {n: (f[0], f[0]) for n, f in feats.items()}, setting["k1"], setting["k2"], setting["lam"]
    )
    gate = {
        **{
            f"AUROC({k}) {kind}": _ood_auroc(stats[k], "test", kind)
            for k in stats
            for kind in ("near", "far")
        },
        **{
            f"AUROC(Q', eps=0) {kind}": _ood_auroc(no_pert["Q'"], "test", kind)
            for kind in ("near", "far")
        },
    }
    q_hist = {n: stats["Q'"][n].tolist() for n in ("id_test", "near_test", "far_test")}
    return {"results": results, "chosen": chosen, "gate": gate, "q_hist": q_hist}


def _controls(ada: AdaSCALE, feats: dict, seed: int) -> dict[str, dict[str, float]]:
    """A random scorer, and AdaSCALE-A (its APS point) with the per-sample percentiles shuffled
    across the test samples: the same percentiles, no longer tied to each sample's ``Q'``."""
    g = torch.Generator().manual_seed(seed)
    random_scores = {n: torch.randn(f[0].shape[0], generator=g) for n, f in feats.items()}
    names = [n for n in feats if n.endswith("test")]
    p = torch.cat([ada.percentile_features(*feats[n]) for n in names])
    p = p[torch.randperm(p.numel(), generator=g)]
    shuffled, start = {}, 0
    for n in names:
        z = feats[n][0]
        part = p[start : start + z.shape[0]]
        start += z.shape[0]
        with torch.no_grad():
            r = F.scale_factor(z, part).to(z.dtype)
            shuffled[n] = F.energy(ada.head(z * r.exp()[:, None]))
    return {
        "random (control)": _metrics(random_scores, "test"),
        SHUFFLED: _metrics(shuffled, "test"),
    }


def _mean_se(values: Sequence[float]) -> tuple[float, float]:
    a = np.asarray(values, dtype=float)
    se = float(a.std(ddof=1) / np.sqrt(a.size)) if a.size > 1 else math.nan
    return float(a.mean()), se


def probe(model: Any, data: dict, setting: dict, n: int, seed: int) -> list[dict]:
    """Energy's and Q''s (picked setting) AUROC on each unseen shape class alone."""
    kw = {k: setting[k] for k in ("k1", "k2", "lam", "eps", "o")}
    det = AdaSCALE(model.features, model.fc, n_fit=None, **kw).fit(data["fit"])
    energy_det = Energy(model.features, model.fc)
    q_id = det.statistic_features(*det.extract(data["id_val"]))
    e_id = energy_det.score(data["id_val"])
    rows = []
    for c in shapes.NEAR_CLASSES + shapes.CANDIDATE_CLASSES:
        x = torch.from_numpy(shapes.normalise(shapes.shapes((c,), n, 2_000_000 + 97 * seed + c)[0]))
        q = det.statistic_features(*det.extract(x))
        rows.append(
            {
                "class": shapes.CLASSES[c],
                "near-OOD set": c in shapes.NEAR_CLASSES,
                "AUROC(energy)": auroc(e_id, energy_det.score(x)),
                "AUROC(Q')": auroc(-q_id, -q),
            }
        )
    return rows


def _pick_setting(rows: list[dict]) -> dict:
    """The searched setting with the best near-OOD validation AUROC of Q'."""
    best = max(rows, key=lambda r: r["AUROC(Q') near"])
    return {k: best[k] for k in ("eps", "o", "k1", "k2", "lam")}


def _aggregate(runs: list[dict]) -> dict[str, dict[str, tuple[float, float]]]:
    names = list(runs[0]["results"])
    keys = list(runs[0]["results"][names[0]])
    return {n: {k: _mean_se([r["results"][n][k] for r in runs]) for k in keys} for n in names}


def _beyond(report: Report, name: str, metric: str, diffs: Sequence[float], note: str) -> None:
    """A claim that a paired difference (positive = the claim's side) exceeds 2 s.e."""
    mean, se = _mean_se(diffs)
    report.claim(
        name,
        metric,
        mean,
        2 * se,
        direction="higher",
        baseline_name="2 paired s.e.",
        held=bool(mean > 2 * se),
        samples=len(diffs),
        note=note,
    )


def _claims(report: Report, runs: list[dict], agg: dict, n: int) -> None:
    gate = {k: _mean_se([r["gate"][k] for r in runs]) for k in runs[0]["gate"]}
    for kind in ("near", "far"):
        q, q_se = gate[f"AUROC(Q') {kind}"]
        report.claim(
            f"premise: Q' separates ID from {kind}-OOD (AUROC > 0.6 beyond 2 s.e.)",
            f"AUROC(Q') {kind}",
            q,
            0.6,
            direction="higher",
            baseline_name="gate 0.6",
            held=bool(q - 2 * q_se > 0.6),
            samples=n,
            note=f"s.e. {q_se:.3f}; AUROC(Q) {gate[f'AUROC(Q) {kind}'][0]:.3f}, "
            f"AUROC(C_o) {gate[f'AUROC(C_o) {kind}'][0]:.3f}",
        )

    def diffs(a: str, b: str, key: str) -> list[float]:
        # paired per classifier; positive = a's FPR@95 is lower
        return [r["results"][b][key] - r["results"][a][key] for r in runs]

    _beyond(
        report,
        "the perturbation adds information to Q' (control: eps = 0)",
        "AUROC(Q') - AUROC(Q', eps=0), near",
        [r["gate"]["AUROC(Q') near"] - r["gate"]["AUROC(Q', eps=0) near"] for r in runs],
        "Q' with z~ = z is the top-k2 activation sum alone",
    )
    for kind in ("near", "far"):
        key = f"{kind} FPR@95"
        for rival in ("SCALE", "OptFS"):
            _beyond(
                report,
                f"AdaSCALE-A FPR@95 < {rival}'s ({kind}-OOD)",
                f"{rival} - AdaSCALE-A, {key}",
                diffs("AdaSCALE-A", rival, key),
                f"FPR@95 {agg['AdaSCALE-A'][key][0]:.4f} vs {agg[rival][key][0]:.4f}",
            )
    near, far = (
        diffs("AdaSCALE-A", "SCALE", "near FPR@95"),
        diffs("AdaSCALE-A", "SCALE", "far FPR@95"),
    )
    _beyond(
        report,
        "the gain over SCALE is larger near than far",
        "near gain - far gain (FPR@95)",
        [a - b for a, b in zip(near, far, strict=True)],
        f"gains {np.mean(near):.4f} near, {np.mean(far):.4f} far",
    )
    _beyond(
        report,
        "the adaptive part carries information: AdaSCALE-A beats its shuffled-p twin (near)",
        "shuffled - AdaSCALE-A, near FPR@95",
        diffs("AdaSCALE-A", SHUFFLED, "near FPR@95"),
        "same percentiles, shuffled across test samples",
    )
    _beyond(
        report,
        "negative control (must read not held): shuffled-p AdaSCALE-A beats SCALE (near)",
        "SCALE - shuffled, near FPR@95",
        diffs(SHUFFLED, "SCALE", "near FPR@95"),
        "held would mean a gain without information in Q'",
    )


def _tables(report: Report, rows: list[dict], setting: dict, runs: list[dict], agg: dict) -> None:
    report.table(
        "Search: every perturbation setting tried (classifier seed 0, validation)",
        [
            {**{k: v for k, v in r.items()}, "picked": all(r[k] == setting[k] for k in setting)}
            for r in rows
        ],
    )
    report.table(
        "Test metrics, mean ± s.e. over classifiers (percentiles by APS on validation)",
        [{"method": n, **{k: f"{m:.4f} ± {s:.4f}" for k, (m, s) in agg[n].items()}} for n in agg],
    )
    report.table(
        "Gate on test (AUROC of each statistic as an OOD score), per classifier",
        [
            {"classifier": r["classifier"], "ID acc": r["accuracy"]}
            | {k: round(v, 4) for k, v in r["gate"].items()}
            for r in runs
        ],
    )
    report.table(
        "Percentiles chosen on validation, per classifier",
        [
            {"classifier": r["classifier"], **{n: str(p) for n, p in r["chosen"].items() if p}}
            for r in runs
        ],
    )


def _figures(report: Report, runs: list[dict], agg: dict) -> None:
    from shared_core.report import subplots

    fig, axes = subplots(1, 2, figsize=(11, 3.8))
    names = list(agg)
    for ax, kind in zip(axes, ("near", "far"), strict=True):
        means = [agg[n][f"{kind} FPR@95"][0] for n in names]
        errs = [2 * agg[n][f"{kind} FPR@95"][1] for n in names]
        ax.bar(range(len(names)), means, yerr=errs, color=["C0"] * 6 + ["C3"] * 2 + ["0.6"] * 2)
        ax.set_xticks(range(len(names)), names, rotation=60, ha="right")
        ax.set_title(f"{kind}-OOD FPR@95 (lower is better, ±2 s.e.)")
    report.figure("fpr95", fig, "FPR@95 per method on the test split, mean over classifiers")
    fig, ax = subplots(figsize=(6, 3.5))
    hist = runs[0]["q_hist"]
    for name, label in (("id_test", "ID"), ("near_test", "near-OOD"), ("far_test", "far-OOD")):
        ax.hist(hist[name], bins=40, alpha=0.5, density=True, label=label)
    ax.set_xlabel("Q' = lam Q + C_o")
    ax.legend()
    report.figure("q_prime", fig, "Q' on the test split of the first comparison classifier")


def classifier(report: Report, recipe: Recipe) -> tuple[torch.nn.Module, float]:
    """The trained fixture for ``recipe`` and its ID accuracy, trained once and cached in the
    report's checkpoints (keyed on the fixture and data code only)."""
    entry = report.cached(
        f"fixture-{recipe.key()}", lambda: trained_entry(recipe), code=[fixture, shapes]
    )
    return decode_state(recipe, entry["state"]), float(entry["accuracy"])


def run(args: ReproduceArgs) -> Report:
    torch.set_num_threads(1)  # small convolutions: one thread beats two busy cores
    cfg = sizes(args)
    report = Report(
        "adascale",
        "AdaSCALE: Adaptive Scaling for OOD Detection (CPU reproduction)",
        args.out,
        {
            "size": args.size,
            "seed": args.seed,
            **{k: cfg[k] for k in ("fit", "id", "ood")},
            "backbones": [r.name for r in cfg["backbones"]],
        },
    )
    search_model, _ = classifier(report, cfg["search"])
    search_data = datasets(args.seed, cfg["fit"], cfg["id"], cfg["ood"])
    rows = report.cached(
        "search", lambda: search(search_model, search_data, cfg["grid"], cfg["stat_grid"])
    )
    setting = _pick_setting(rows)
    probe_rows = report.cached(
        "probe", lambda: probe(search_model, search_data, setting, cfg["probe"], args.seed)
    )
    runs = []
    for recipe in progress(cfg["backbones"], desc="classifiers"):
        model, accuracy = classifier(report, recipe)

        def one(recipe: Recipe = recipe, model: Any = model) -> dict:
            data = datasets(args.seed + 100 + recipe.seed, cfg["fit"], cfg["id"], cfg["ood"])
            return compare(model, data, setting, recipe.seed)

        out = report.cached(f"compare-{recipe.key()}", one)
        runs.append({**out, "classifier": recipe.name, "accuracy": accuracy})
    n = len(runs)
    agg = _aggregate(runs)
    worst = min(r["accuracy"] for r in runs)
    report.claim(
        "the fixture classifiers have learned their task (every one)",
        "lowest ID accuracy",
        worst,
        0.95,
        direction="higher",
        baseline_name="0.95 floor",
        samples=n,
    )
    _claims(report, runs, agg, n)
    _tables(report, rows, setting, runs, agg)
    report.table("Unseen shape classes one by one (classifier seed 0, picked setting)", probe_rows)
    _figures(report, runs, agg)
    report.settings["picked_setting"] = setting
    return report


def main(argv: Sequence[str] | None = None) -> int:
    return reproduce_main(run, argv, description=__doc__ or "")


if __name__ == "__main__":
    raise SystemExit(main())
