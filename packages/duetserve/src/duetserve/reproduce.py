"""Reproduce DuetServe's claims at CPU scale with the roofline simulator.

    python -m duetserve.reproduce [--quick|--full|--smoke] [--out DIR]

Qwen3-8B and Qwen3-14B shapes on the H100 SXM profile; Mooncake-style (long prompts), bursty and
mix-shifting traces. The bandwidth-saturation point of the assumed B(n) curve is swept, since the size
of the effect rests on it. Metrics: the highest rate meeting P99 TBT <= 50 ms and P99 TTFT <= 3 s,
throughput at a fixed load, P50/P99 TBT, the fraction of iterations in spatial mode. Negative
controls: DuetServe with spatial execution switched off, with a random split, and on a GPU whose
bandwidth does not saturate (B(n) linear in n).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from duetserve.experiments import (
    NoSpatialOptimizer,
    RandomSplitOptimizer,
    Slo,
    build_model,
    optimistic_model,
    run_at,
    slo_rate,
    unit_trace,
)
from duetserve.optimizer import PartitionOptimizer
from shared_core.cli import ReproduceArgs, progress, reproduce_main
from shared_core.report import Report

SLO = Slo(tbt_s=0.05, ttft_s=3.0)
LIGHT_RATE = 1.0  # conversation requests/s: a fraction of one H100's capacity
HEAVY_RATE = 6.0  # Mooncake requests/s: past the aggregated baseline's SLO-compliant rate
TUNED_BUDGETS = (512, 1024, 2048)
PAPER_RATIO = 2.72 / 2.14  # Mooncake peak load, DuetServe vs vLLM (paper, via the review)
PLANNER_ERRORS = (1.05, 1.10)  # the planner believes the GPU this much faster than it is
# One-roof errors for the margin test: a uniform error with tp = 1 and no launch overhead scales
# every prediction alike, so planning for SLO / factor would be the exact planner (vacuous).
MARGIN_ROOFS = ("flops", "bandwidth")
LIGHT_TTFT_TOLERANCE = 0.10  # light load: P99 TTFT within 10 % of aggregated's


def _mean_se(xs: Sequence[float]) -> tuple[float, float]:
    a = np.asarray(xs, dtype=float)
    se = float(a.std(ddof=1) / math.sqrt(a.size)) if a.size > 1 else math.nan
    return float(a.mean()), se


def search_resolution(bisections: int) -> float:
    """The relative grid step of :func:`slo_rate` after ``bisections`` halvings of a doubling
    (in log space): two seeds that land on the same grid point still differ by up to this much."""
    return 2.0 ** (1.0 / 2**bisections) - 1.0


class _Runner:
    """Runs and caches the searches; every result is a list over seeds."""

    def __init__(self, args: ReproduceArgs, report: Report) -> None:
        self.args = args
        self.report = report
        self.n = args.pick(smoke=24, quick=240, full=1000)
        self.max_rate = args.pick(smoke=8.0, quick=32.0, full=64.0)
        self.seeds = list(range(args.pick(smoke=1, quick=3, full=5)))
        self.bisections = args.pick(smoke=2, quick=4, full=6)
        self.bar = progress(total=0, desc="simulations", unit="search")
        self.curves: dict[str, list[dict[str, float]]] = {}

    def rates(self, model: str, sat: float, workload: str, policy: str, **kw: Any) -> list[float]:
        variant = kw.pop("variant", policy)
        key = f"rate-{model}-{sat}-{workload}-{variant}"
        out = []
        for seed in self.seeds:
            self.bar.total += 1
            result = self.report.cached(
                f"{key}-s{seed}",
                lambda seed=seed: self._search(model, sat, workload, policy, seed, kw),
            )
            out.append(result["rate"])
            if seed == 0:
                self.curves[key] = result["points"]
            self.bar.update(1)
        return out

    def _search(
        self, model: str, sat: float, workload: str, policy: str, seed: int, kw: dict[str, Any]
    ) -> dict[str, Any]:
        rm = build_model(model, sat)
        kw = self._optimizer(rm, kw, seed)
        res = slo_rate(
            unit_trace(workload, self.n, seed),
            policy,  # type: ignore[arg-type]
            rm,
            SLO,
            bisections=self.bisections,
            max_rate=self.max_rate,
            **kw,
        )
        return {"rate": res.rate, "points": res.points}

    @staticmethod
    def _optimizer(rm: Any, kw: dict[str, Any], seed: int) -> dict[str, Any]:
        kw = dict(kw)
        ablation = kw.pop("ablation", None)
        if ablation == "no_spatial":
            kw["optimizer"] = NoSpatialOptimizer(rm, SLO.tbt_s)
        elif ablation == "random_split":
            kw["optimizer"] = RandomSplitOptimizer(rm, SLO.tbt_s, seed=seed)
        factor = kw.pop("planner_error", None)
        if factor is not None:  # the model-error control: the planner's roofline is optimistic
            margin = kw.pop("planned_slo_margin", 1.0)
            roof = kw.pop("planner_roof", "both")
            kw["optimizer"] = PartitionOptimizer(
                optimistic_model(rm, factor, roof), SLO.tbt_s / margin
            )
        return kw

    def fixed(
        self, model: str, sat: float, workload: str, rate: float, policy: str, **kw: Any
    ) -> list[dict[str, float]]:
        variant = kw.pop("variant", policy)
        out = []
        for seed in self.seeds:
            self.bar.total += 1

            def compute(seed: int = seed) -> dict[str, float]:
                rm = build_model(model, sat)
                res = run_at(
                    unit_trace(workload, self.n, seed),
                    rate,
                    policy,  # type: ignore[arg-type]
                    rm,
                    SLO,
                    **self._optimizer(rm, kw, seed),
                )
                return res.summary()

            out.append(
                self.report.cached(
                    f"fixed-{model}-{sat}-{workload}-{rate}-{variant}-s{seed}", compute
                )
            )
            self.bar.update(1)
        return out


def _rate_claim(
    report: Report,
    name: str,
    ours: list[float],
    base: list[float],
    base_name: str,
    resolution: float,
    note: str = "",
) -> dict[str, float]:
    """Claim ``ours`` sustains a higher SLO rate than ``base``: the paired per-seed ratio's mean
    minus two standard errors must exceed 1. The s.e. is floored at the rate search's grid step
    ``resolution``: seeds landing on the same grid points would otherwise give 2 s.e. = 0."""
    ratios = [
        o / b if b > 0 else (math.inf if o > 0 else math.nan)
        for o, b in zip(ours, base, strict=True)
    ]
    finite = [r for r in ratios if math.isfinite(r)]
    mean_r, se_r = _mean_se(finite) if finite else (math.nan, math.nan)
    se_r = max(se_r, resolution)
    n = len(ours)
    held = bool(finite) and len(finite) == n and n >= 3 and mean_r - 2 * se_r > 1.0
    if finite and len(finite) < n:
        note = f"{note} {n - len(finite)} seed(s) with a zero baseline rate.".strip()
    report.claim(
        name,
        "SLO-compliant rate (req/s per GPU)",
        float(np.mean(ours)),
        float(np.mean(base)),
        direction="higher",
        baseline_name=base_name,
        held=held,
        samples=n,
        note=f"paired ratio {mean_r:.3f} ± {2 * se_r:.3f} (2 s.e., floored at the search's "
        f"{resolution:.1%} grid step), held when ratio - 2 s.e. > 1. {note}".strip(),
    )
    return {"ratio": mean_r, "ratio_2se": 2 * se_r}


def _paired_claim(
    report: Report,
    name: str,
    metric: str,
    key: str,
    ours: list[dict[str, float]],
    base: list[dict[str, float]],
    base_name: str,
    direction: str,
    tolerance: float = 0.0,
    note: str = "",
) -> None:
    """A fixed-load claim judged on the paired per-seed ratio ``ours[key] / base[key]``: "higher"
    holds when ratio - 2 s.e. > 1, "lower" when ratio + 2 s.e. < 1, "close" when the whole
    ratio ± 2 s.e. lies within 1 ± ``tolerance``."""
    ratios = [o[key] / b[key] for o, b in zip(ours, base, strict=True)]
    mean_r, se_r = _mean_se(ratios)
    lo, hi = mean_r - 2 * se_r, mean_r + 2 * se_r
    rule = {
        "higher": (lo > 1.0, "ratio - 2 s.e. > 1"),
        "lower": (hi < 1.0, "ratio + 2 s.e. < 1"),
        "close": (
            1 - tolerance < lo and hi < 1 + tolerance,
            f"ratio ± 2 s.e. in 1 ± {tolerance:g}",
        ),
    }
    held, text = rule[direction]
    report.claim(
        name,
        metric,
        float(np.mean([o[key] for o in ours])),
        float(np.mean([b[key] for b in base])),
        direction=direction,  # type: ignore[arg-type]
        baseline_name=base_name,
        held=bool(held and len(ratios) >= 3 and math.isfinite(se_r)),
        samples=len(ratios),
        tolerance=tolerance * float(np.mean([b[key] for b in base])),
        note=f"paired ratio {mean_r:.3f} ± {2 * se_r:.3f} (2 s.e.), held when {text}. {note}".strip(),
    )


def _slo_claim(
    report: Report, name: str, runs: list[dict[str, float]], meets: bool, note: str = ""
) -> None:
    """P99 TBT against the SLO on every seed: ``meets`` asks every seed within it, else every seed
    beyond it (each seed's figure is already a P99 over thousands of gaps)."""
    slo_ms = SLO.tbt_s * 1e3
    per_seed = [x["p99_tbt_ms"] for x in runs]
    held = all(v <= slo_ms for v in per_seed) if meets else all(v > slo_ms for v in per_seed)
    report.claim(
        name,
        "P99 TBT (ms)",
        float(np.mean(per_seed)),
        slo_ms,
        direction="lower" if meets else "higher",
        baseline_name="SLO",
        held=held,
        samples=len(per_seed),
        note=f"per seed {', '.join(f'{v:.1f}' for v in per_seed)} ms; held when every seed is "
        f"{'within' if meets else 'beyond'} the SLO. {note}".strip(),
    )


def run(args: ReproduceArgs) -> Report:
    import matplotlib

    matplotlib.use("Agg")
    report = Report(
        "duetserve",
        "DuetServe: Harmonizing Prefill and Decode for LLM Serving via Adaptive GPU Multiplexing",
        args.out,
        {"size": args.size, "seed": args.seed, "tbt_slo_s": SLO.tbt_s, "ttft_slo_s": SLO.ttft_s},
    )
    r = _Runner(args, report)
    rows: list[dict[str, Any]] = []
    _rate_claims(report, r, rows)
    fixed_rows = _fixed_load_claims(report, r)
    report.table("slo_rates", rows)
    report.table("fixed_loads", fixed_rows)
    r.bar.close()
    _figures(report, rows, r.curves)
    return report


NO_SPATIAL: dict[str, Any] = {"ablation": "no_spatial", "variant": "no-spatial"}
SPATIAL_OFF = "duet without spatial"
SHARED_BW = "duet, shared HBM bandwidth"


def _rate_claims(report: Report, r: _Runner, rows: list[dict[str, Any]]) -> None:
    """The SLO-rate claims. Every comparison of DuetServe with a baseline is paired with one against
    DuetServe with spatial execution off: the chunk cap alone explains much of the gain over an
    8192-token budget, and only the second comparison credits the SM split."""
    res = search_resolution(r.bisections)
    sats = r.args.pick(smoke=[0.35], quick=[0.25, 0.35, 1.0], full=[0.2, 0.25, 0.35, 0.5, 1.0])
    main = ("Qwen3-8B", 0.35, "mooncake")

    def add(model: str, sat: float, workload: str, policy: str, rates: list[float]) -> None:
        m, se = _mean_se(rates)
        rows.append(
            {
                "model": model,
                "bw_saturation": sat,
                "workload": workload,
                "policy": policy,
                "slo_rate": m,
                "slo_rate_se": se,
                "seeds": len(rates),
            }
        )

    def pair(model: str, sat: float, workload: str, base_policy: str, what: str) -> dict[str, Any]:
        ours = r.rates(model, sat, workload, "duet")
        base = r.rates(model, sat, workload, base_policy)
        off = r.rates(model, sat, workload, "duet", **NO_SPATIAL)
        for policy, v in (("duet", ours), (base_policy, base), (SPATIAL_OFF, off)):
            add(model, sat, workload, policy, v)
        budget = " at its 8192-token budget" if base_policy == "aggregated" else ""
        vs_base = _rate_claim(
            report,
            f"{what}: DuetServe (chunk cap and SM split together) sustains a higher SLO rate "
            f"than {base_policy}{budget}",
            ours,
            base,
            base_policy + budget,
            res,
            note="a chunk-size effect as much as an SM-split one: see the spatial-off claim.",
        )
        split = _rate_claim(
            report,
            f"{what}: the SM split itself: DuetServe beats its spatial-off ablation "
            "(same TBT-aware chunk cap, no split)",
            ours,
            off,
            "duet, spatial off",
            res,
            note="if not held, the gain over the baseline comes from chunk sizing, not SMs.",
        )
        return {"ours": ours, "base": base, "off": off, "vs_base": vs_base["ratio"], **split}

    # 1. The bandwidth-saturation sweep: Qwen3-8B, Mooncake.
    sweep = {
        sat: pair(
            "Qwen3-8B", sat, "mooncake", "aggregated", f"Mooncake Qwen3-8B, B(n) at {sat:.0%}"
        )
        for sat in sats
    }
    duet = sweep[0.35]["ours"]

    # 2. Other baselines at the main setting.
    tuned = np.max(
        [
            r.rates(*main, "aggregated", token_budget=b, variant=f"aggregated-{b}")
            for b in TUNED_BUDGETS
        ],
        axis=0,
    ).tolist()
    others = {
        "aggregated (best budget)": tuned,
        "static_spatial": r.rates(*main, "static_spatial"),
        "disaggregated": r.rates(*main, "disaggregated"),
    }
    for name, v in others.items():
        add(*main, name, v)
    _rate_claim(
        report,
        "Mooncake Qwen3-8B: DuetServe beats aggregated with its token budget tuned "
        f"({'/'.join(map(str, TUNED_BUDGETS))})",
        duet,
        tuned,
        "aggregated, best budget",
        res,
        note=f"paper: {PAPER_RATIO:.2f}x over vLLM on Mooncake.",
    )
    _rate_claim(
        report,
        "Mooncake Qwen3-8B: DuetServe beats 1P+1D disaggregation per GPU",
        duet,
        others["disaggregated"],
        "disaggregated (per GPU)",
        res,
    )

    # 3. The larger model, the bursty trace, the shifting mix.
    pair("Qwen3-14B", 0.35, "mooncake", "aggregated", "Mooncake Qwen3-14B")
    pair("Qwen3-8B", 0.35, "bursty", "aggregated", "bursty Qwen3-8B")
    shifting = pair("Qwen3-8B", 0.35, "shifting", "static_spatial", "shifting mix Qwen3-8B")
    _stationary_control(report, r, shifting, add)

    if 1.0 in sweep:
        report.claim(
            "Control: without bandwidth saturation (B(n) linear) the SM split's gain shrinks",
            "DuetServe / spatial-off SLO-rate ratio",
            sweep[1.0]["ratio"],
            sweep[0.35]["ratio"],
            direction="lower",
            baseline_name="saturating at 35 %",
            samples=len(r.seeds),
            note="the paper's premise is what makes small decode partitions pay.",
        )


def _stationary_control(
    report: Report, r: _Runner, shifting: dict[str, Any], add: Callable[..., None]
) -> None:
    """The shifting-mix claim's control: the same requests at the same arrival times with their
    lengths shuffled (a stationary mix). If a static split loses *because* the mix shifts, its gap to
    DuetServe is smaller there."""
    ours = r.rates("Qwen3-8B", 0.35, "shuffled", "duet")
    static = r.rates("Qwen3-8B", 0.35, "shuffled", "static_spatial")
    add("Qwen3-8B", 0.35, "shuffled", "duet", ours)
    add("Qwen3-8B", 0.35, "shuffled", "static_spatial", static)
    shift_r = [
        o / b if b > 0 else math.inf
        for o, b in zip(shifting["ours"], shifting["base"], strict=True)
    ]
    still_r = [o / b if b > 0 else math.inf for o, b in zip(ours, static, strict=True)]
    diffs = [a - b for a, b in zip(shift_r, still_r, strict=True)]
    finite = all(math.isfinite(d) for d in diffs)
    mean_d, se_d = _mean_se(diffs) if finite else (math.nan, math.nan)
    se_d = max(se_d, search_resolution(r.bisections))
    report.claim(
        "Control: on the same requests in a stationary (shuffled) order, DuetServe's gain over a "
        "static 50/50 split shrinks",
        "DuetServe / static SLO-rate ratio",
        float(np.mean(still_r)),
        float(np.mean(shift_r)),
        direction="lower",
        baseline_name="shifting order",
        held=bool(finite and len(diffs) >= 3 and mean_d - 2 * se_d > 0),
        samples=len(diffs),
        note=f"paired difference shifting - shuffled {mean_d:.3f} ± {2 * se_d:.3f} (2 s.e., "
        "floored at the grid step), held when it is > 0; if not held, a static split loses "
        "as much without the shift: the shifting-mix claim credits the split, not the shift.",
    )


def _fixed_load_claims(report: Report, r: _Runner) -> list[dict[str, Any]]:
    """Light and heavy fixed loads, judged on paired per-seed ratios (or every seed vs the SLO)."""
    main = ("Qwen3-8B", 0.35, "mooncake")
    light = {
        p: r.fixed("Qwen3-8B", 0.35, "conversation", LIGHT_RATE, p)
        for p in ("aggregated", "duet", "static_spatial")
    }
    heavy = {p: r.fixed(*main, HEAVY_RATE, p) for p in ("aggregated", "duet", "static_spatial")}
    heavy["duet, random split"] = r.fixed(
        *main, HEAVY_RATE, "duet", ablation="random_split", variant="random-split"
    )
    heavy[SPATIAL_OFF] = r.fixed(*main, HEAVY_RATE, "duet", **NO_SPATIAL)
    for f in PLANNER_ERRORS:
        heavy[f"duet, planner x{f:g}"] = r.fixed(
            *main, HEAVY_RATE, "duet", planner_error=f, variant=f"planner-{f:g}"
        )
    worst = max(PLANNER_ERRORS)
    for roof in MARGIN_ROOFS:
        heavy[f"duet, planner {roof} x{worst:g}, SLO / {worst:g}"] = r.fixed(
            *main,
            HEAVY_RATE,
            "duet",
            planner_error=worst,
            planner_roof=roof,
            planned_slo_margin=worst,
            variant=f"planner-{roof}-{worst:g}-margin",
        )
    heavy[SHARED_BW] = r.fixed(
        *main, HEAVY_RATE, "duet", shared_bandwidth=True, variant="shared-bandwidth"
    )
    fixed_rows = [
        {
            "load": label,
            "policy": policy,
            **{k: float(np.mean([x[k] for x in res])) for k in res[0]},
        }
        for label, runs in (
            (f"light {LIGHT_RATE} req/s conversation", light),
            (f"heavy {HEAVY_RATE} req/s Mooncake", heavy),
        )
        for policy, res in runs.items()
    ]

    tol = LIGHT_TTFT_TOLERANCE
    _paired_claim(
        report,
        f"Light load: DuetServe's P99 TTFT is within {tol:.0%} of aggregated's",
        "P99 TTFT (s)",
        "p99_ttft_s",
        light["duet"],
        light["aggregated"],
        "aggregated",
        "close",
        tol,
        note="replaces a throughput test every policy passes (the load is served either way).",
    )
    _paired_claim(
        report,
        f"Negative control: a static 50/50 split's P99 TTFT is within {tol:.0%} of aggregated's "
        "at light load (should not hold)",
        "P99 TTFT (s)",
        "p99_ttft_s",
        light["static_spatial"],
        light["aggregated"],
        "aggregated",
        "close",
        tol,
        note="prefill on half the SMs: the test above can fail.",
    )
    spatial = [x["spatial_fraction"] for x in light["duet"]]
    report.claim(
        "Light load: DuetServe runs mostly aggregated (<= 10 % spatial iterations)",
        "fraction of spatial iterations",
        float(np.mean(spatial)),
        0.10,
        direction="lower",
        baseline_name="10 % bound",
        held=max(spatial) <= 0.10,
        samples=len(spatial),
        note="held when every seed is within the bound.",
    )
    _slo_claim(
        report, "Heavy load: aggregated breaks the P99 TBT SLO", heavy["aggregated"], meets=False
    )
    _slo_claim(
        report,
        "Heavy load: DuetServe meets the P99 TBT SLO (planner = the simulator's roofline)",
        heavy["duet"],
        meets=True,
        note="holds by construction: the optimizer plans with the very model that prices the run.",
    )
    for f in PLANNER_ERRORS:
        _slo_claim(
            report,
            f"Model-error control: DuetServe meets the SLO with a planner {f - 1:.0%} optimistic",
            heavy[f"duet, planner x{f:g}"],
            meets=True,
            note="the planner's roofline has FLOP/s and bandwidth scaled up; the run is priced "
            "by the true one.",
        )
    for roof, part in (
        ("flops", "prefill (compute-bound)"),
        ("bandwidth", "decode (memory-bound)"),
    ):
        _slo_claim(
            report,
            f"Model-error control: a planner with {roof} {worst - 1:.0%} optimistic (it "
            f"under-predicts {part} work) meets the SLO when it plans for SLO / {worst:g}",
            heavy[f"duet, planner {roof} x{worst:g}, SLO / {worst:g}"],
            meets=True,
            note="the margin a user must give tbt_slo_s for a one-roof error this large; the "
            "run is priced by the true roofline.",
        )
    _slo_claim(
        report,
        "Shared HBM sensitivity: DuetServe meets the P99 TBT SLO when a spatial window's prefill "
        "gets only the bandwidth the decode partition leaves, B(N) - B(n_d)",
        heavy[SHARED_BW],
        meets=True,
        note="the planner still assumes independent curves; the run caps the prefill's bandwidth.",
    )
    tput = "output tokens/s per GPU"
    for ours_key, base, what in (
        ("duet", "aggregated", "aggregated's"),
        ("duet", SPATIAL_OFF, "its spatial-off ablation's (the SM split's share)"),
        ("duet", "duet, random split", "a random feasible split's (control)"),
        (SHARED_BW, SPATIAL_OFF, "its spatial-off ablation's, with shared HBM bandwidth"),
    ):
        _paired_claim(
            report,
            f"Heavy load: DuetServe's throughput is higher than {what}",
            tput,
            "tokens_per_s_per_gpu",
            heavy[ours_key],
            heavy[base],
            base,
            "higher",
            note="paper: up to 1.3x total throughput." if base == "aggregated" else "",
        )
    return fixed_rows


def _figures(
    report: Report, rows: list[dict[str, Any]], curves: dict[str, list[dict[str, float]]]
) -> None:
    from shared_core.report import subplots

    fig, ax = subplots(figsize=(5, 3.5))
    for policy in ("aggregated", "duet", SPATIAL_OFF):
        found = sorted(
            (row["bw_saturation"], row["slo_rate"], row["slo_rate_se"])
            for row in rows
            if row["model"] == "Qwen3-8B"
            and row["workload"] == "mooncake"
            and row["policy"] == policy
        )
        if found:
            x, y, e = zip(*found, strict=True)
            ax.errorbar(
                x,
                y,
                yerr=[2 * v if math.isfinite(v) else 0 for v in e],
                marker="o",
                label=policy,
                capsize=3,
            )
    ax.set_xlabel("B(n) saturation point (fraction of SMs)")
    ax.set_ylabel("SLO-compliant rate (req/s)")
    ax.legend()
    report.figure(
        "slo_rate_vs_saturation", fig, "Qwen3-8B, Mooncake-style trace; ±2 s.e. over seeds"
    )

    fig, ax = subplots(figsize=(5, 3.5))
    for key, pts in curves.items():
        if not key.startswith("rate-Qwen3-8B-0.35-mooncake-"):
            continue
        ordered = sorted(pts, key=lambda p: p["rate"])
        ax.plot(
            [p["rate"] for p in ordered],
            [p["p99_tbt_ms"] for p in ordered],
            marker=".",
            label=key.removeprefix("rate-Qwen3-8B-0.35-mooncake-"),
        )
    ax.axhline(SLO.tbt_s * 1e3, color="k", ls="--", lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("request rate (req/s per GPU)")
    ax.set_ylabel("P99 TBT (ms)")
    ax.legend(fontsize=7)
    report.figure("p99_tbt_vs_rate", fig, "Qwen3-8B Mooncake, seed 0: the searches' evaluations")


def readme_table(result: dict[str, Any]) -> str:
    """The README's reproduction table from a ``result.json``: one row per claim, the figure each
    claim was judged on (the note up to its rule), so the README cannot drift from the run."""
    lines = [
        "| # | claim | ours | baseline | held | judged on |",
        "|---|---|---|---|---|---|",
    ]
    for i, c in enumerate(result["claims"], 1):
        held = "n/a" if c.get("na") else ("held" if c["held"] else "**not held**")
        figure = c["note"].split("held when")[0].rstrip(" ;,")
        lines.append(
            f"| {i} | {c['name']} | {c['ours']:.4g} | {c['baseline']:.4g} "
            f"({c['baseline_name']}) | {held} | {figure} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    return reproduce_main(run, argv, description=__doc__ or "")


if __name__ == "__main__":
    raise SystemExit(main())
