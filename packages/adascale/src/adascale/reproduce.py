"""Reproduce AdaSCALE's claims at CPU scale: ``python -m adascale.reproduce [--smoke|--quick|--full]``.

ID = eight procedural shape/texture classes (32x32), near-OOD = two held-out classes, far-OOD =
scikit-image photo/texture crops and noise (:mod:`adascale.shapes`); the classifiers are small
BatchNorm ResNets trained here (:mod:`adascale.fixture`, shipped checkpoints).

1. **Gate and search** (classifier seed 0, validation data only): the AUROC of ``Q``, ``C_o`` and
   ``Q'`` as OOD scores for every perturbation setting tried (``eps``, ``o``, ``k1/k2``, ``lam``);
   the best setting on near-OOD validation is kept.
2. **Comparison** on fresh classifiers (seeds 1-5) and fresh data: Energy, ReAct, ASH-S, SCALE,
   LTS, OptFS, AdaSCALE-A/L, each method's percentile chosen on the OOD validation split (OpenOOD's
   APS), never on test; negative controls: a random scorer, AdaSCALE with its ``Q'`` replaced by
   noise (adaptive but uninformed), and ``Q'`` without the perturbation (``eps = 0``).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from adascale import functional as F
from adascale import shapes
from adascale.baselines import ASH, LTS, SCALE, Energy, OptFS, ReAct
from adascale.detector import AdaSCALE
from adascale.fixture import Recipe, id_accuracy, load_fixture
from adascale.metrics import auroc, fpr_at_tpr
from shared_core.cli import ReproduceArgs, progress, reproduce_main
from shared_core.report import Report

PAPER = {"eps": 0.5, "o": 0.05, "k1": 0.01, "k2": 0.05, "lam": 10.0}
P_SWEEP = [65, 70, 75, 80, 85, 90, 95]
ADA_SWEEP = [65, 70, 75, 80, 85, 90, 95, 99]
REACT_SWEEP = [85, 90, 95, 99]
METHODS = ("Energy", "ReAct", "ASH-S", "SCALE", "LTS", "OptFS", "AdaSCALE-A", "AdaSCALE-L")
CONTROLS = ("random", "AdaSCALE-A (noise Q')")


def sizes(args: ReproduceArgs) -> dict[str, Any]:
    return {
        "fit": args.pick(smoke=96, quick=600, full=5000),
        "id": args.pick(smoke=48, quick=400, full=2000),  # per split (val, test), over 8 classes
        "ood": args.pick(smoke=24, quick=200, full=1000),  # per near/far split
        "probe": args.pick(smoke=8, quick=100, full=500),  # per candidate class
        "search_seed": 0,
        "seeds": args.pick(smoke=[0], quick=[1, 2, 3], full=[1, 2, 3, 4, 5]),
        "grid": args.pick(
            smoke=[(0.5, 0.05)],
            quick=[(0.1, 0.05), (0.5, 0.05), (2.0, 0.05), (0.5, 0.2)],
            full=list(itertools.product([0.05, 0.1, 0.25, 0.5, 1.0, 2.0], [0.01, 0.05, 0.2, 0.5])),
        ),
        "stat_grid": [
            (0.01, 0.05, 10.0),
            (0.01, 0.05, 1.0),
            (0.01, 0.05, 100.0),
            (0.05, 0.3, 10.0),
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
    for name, (det, grid) in _detectors(model, setting).items():
        if isinstance(det, AdaSCALE):
            det.fit_features(*fit)
        elif hasattr(det, "fit_features"):
            det.fit_features(fit[0])
        chosen[name] = _aps(det, grid, feats)
        results[name] = _metrics({n: _scores(det, f) for n, f in feats.items()}, "test")
    results.update(_controls(model, setting, fit, feats, chosen["AdaSCALE-A"], seed))
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


def _controls(model, setting, fit, feats, ada_point, seed) -> dict[str, dict[str, float]]:
    """A random scorer, and AdaSCALE-A whose Q' is replaced by noise (adaptive, uninformed)."""
    g = torch.Generator().manual_seed(seed)
    random_scores = {n: torch.randn(f[0].shape[0], generator=g) for n, f in feats.items()}
    det = AdaSCALE(
        model.features,
        model.fc,
        n_fit=None,
        **{k: setting[k] for k in ("k1", "k2", "lam", "eps", "o")},
    )
    det.fit_features(*fit)
    det.p_max = ada_point["p_max"]
    fit_q = det.fit_statistic_
    noisy = {}
    for n, (z, _) in feats.items():
        fake_q = fit_q[torch.randint(len(fit_q), (z.shape[0],), generator=g)]  # ID-like draws
        p = F.adaptive_percentile(fake_q, fit_q, p_min=det.p_min, p_max=det.p_max)
        with torch.no_grad():
            noisy[n] = F.energy(model.fc(z * F.scale_factor(z, p).exp()[:, None].to(z.dtype)))
    return {
        "random": _metrics(random_scores, "test"),
        "AdaSCALE-A (noise Q')": _metrics(noisy, "test"),
    }


def _mean_se(values: Sequence[float]) -> tuple[float, float]:
    a = np.asarray(values, dtype=float)
    se = float(a.std(ddof=1) / np.sqrt(a.size)) if a.size > 1 else math.nan
    return float(a.mean()), se


def probe(model: Any, data: dict, n: int, seed: int) -> list[dict]:
    """Energy's and Q''s (paper setting) AUROC on each unseen shape class alone."""
    det = AdaSCALE(model.features, model.fc, n_fit=None).fit(data["fit"])
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


def _claims(report: Report, runs: list[dict], agg: dict, n: int) -> None:
    gate = {k: _mean_se([r["gate"][k] for r in runs]) for k in runs[0]["gate"]}
    q_near, q_se = gate["AUROC(Q') near"]
    q_far = gate["AUROC(Q') far"][0]
    report.claim(
        "premise: Q' separates ID from near-OOD",
        "AUROC(Q') near",
        q_near,
        0.6,
        direction="higher",
        baseline_name="gate 0.6",
        samples=n,
        note=f"s.e. {q_se:.3f}; far-OOD AUROC(Q') {q_far:.3f}",
    )
    no_pert = gate["AUROC(Q', eps=0) near"][0]
    report.claim(
        "the perturbation adds information to Q' (control: eps = 0)",
        "AUROC(Q') near",
        q_near,
        no_pert,
        direction="higher",
        baseline_name="Q' without perturbation",
        samples=n,
        note="Q' with z~ = z is the top-k2 activation sum alone; a tie means Q adds nothing",
    )
    for kind in ("near", "far"):
        key = f"{kind} FPR@95"
        ours, ours_se = agg["AdaSCALE-A"][key]
        for rival in ("SCALE", "OptFS"):
            base, base_se = agg[rival][key]
            report.claim(
                f"AdaSCALE-A FPR@95 <= {rival}'s ({kind}-OOD)",
                key,
                ours,
                base,
                direction="lower",
                baseline_name=rival,
                samples=n,
                note=f"s.e. {ours_se:.4f} vs {base_se:.4f}",
            )
    gains = {
        kind: _mean_se(
            [
                r["results"]["SCALE"][f"{kind} FPR@95"]
                - r["results"]["AdaSCALE-A"][f"{kind} FPR@95"]
                for r in runs
            ]
        )
        for kind in ("near", "far")
    }
    report.claim(
        "the gain over SCALE is larger near than far",
        "FPR@95 gain over SCALE",
        gains["near"][0],
        gains["far"][0],
        direction="higher",
        baseline_name="far-OOD gain",
        samples=n,
        note=f"s.e. {gains['near'][1]:.4f} (near), {gains['far'][1]:.4f} (far)",
    )
    for control in CONTROLS:
        key = "near FPR@95"
        report.claim(
            f"AdaSCALE-A beats the negative control '{control}' (near)",
            key,
            agg["AdaSCALE-A"][key][0],
            agg[control][key][0],
            direction="lower",
            baseline_name=control,
            samples=n,
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
        "Test metrics, mean ± s.e. over classifier seeds (percentiles by APS on validation)",
        [{"method": n, **{k: f"{m:.4f} ± {s:.4f}" for k, (m, s) in agg[n].items()}} for n in agg],
    )
    report.table(
        "Gate on test (AUROC of each statistic as an OOD score), per seed",
        [{"seed": r["seed"], **{k: round(v, 4) for k, v in r["gate"].items()}} for r in runs],
    )
    report.table(
        "Percentiles chosen on validation, per seed",
        [{"seed": r["seed"], **{n: str(p) for n, p in r["chosen"].items() if p}} for r in runs],
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
    report.figure("fpr95", fig, "FPR@95 per method on the test split, mean over classifier seeds")
    fig, ax = subplots(figsize=(6, 3.5))
    hist = runs[0]["q_hist"]
    for name, label in (("id_test", "ID"), ("near_test", "near-OOD"), ("far_test", "far-OOD")):
        ax.hist(hist[name], bins=40, alpha=0.5, density=True, label=label)
    ax.set_xlabel("Q' = lam Q + C_o")
    ax.legend()
    report.figure("q_prime", fig, "Q' on the test split of the first comparison seed")


def run(args: ReproduceArgs) -> Report:
    torch.set_num_threads(2)
    cfg = sizes(args)
    report = Report(
        "adascale",
        "AdaSCALE: Adaptive Scaling for OOD Detection (CPU reproduction)",
        args.out,
        {
            "size": args.size,
            "seed": args.seed,
            **{k: cfg[k] for k in ("fit", "id", "ood", "seeds")},
        },
    )
    search_model = load_fixture(Recipe(seed=cfg["search_seed"]))
    search_data = datasets(args.seed + cfg["search_seed"], cfg["fit"], cfg["id"], cfg["ood"])
    rows = report.cached(
        "search", lambda: search(search_model, search_data, cfg["grid"], cfg["stat_grid"])
    )
    setting = _pick_setting(rows)
    probe_rows = report.cached(
        "probe", lambda: probe(search_model, search_data, cfg["probe"], args.seed)
    )
    runs = []
    for seed in progress(cfg["seeds"], desc="classifier seeds"):
        model = load_fixture(Recipe(seed=seed))

        def one(seed: int = seed, model: Any = model) -> dict:
            data = datasets(args.seed + 100 + seed, cfg["fit"], cfg["id"], cfg["ood"])
            out = compare(model, data, setting, seed)
            return {**out, "seed": seed, "accuracy": id_accuracy(model, seed=77 + seed)}

        runs.append(report.cached(f"compare-seed{seed}", one))
    n = len(runs)
    agg = _aggregate(runs)
    acc = _mean_se([r["accuracy"] for r in runs])
    report.claim(
        "the fixture classifiers have learned their task",
        "ID accuracy",
        acc[0],
        0.95,
        direction="higher",
        baseline_name="0.95 floor",
        samples=n,
    )
    _claims(report, runs, agg, n)
    _tables(report, rows, setting, runs, agg)
    report.table("Unseen shape classes one by one (classifier seed 0, paper setting)", probe_rows)
    _figures(report, runs, agg)
    report.settings["picked_setting"] = setting
    return report


def main(argv: Sequence[str] | None = None) -> int:
    return reproduce_main(run, argv, description=__doc__ or "")


if __name__ == "__main__":
    raise SystemExit(main())
