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
from collections.abc import Sequence
from typing import Any

import numpy as np

from duetserve.experiments import (
    NoSpatialOptimizer,
    RandomSplitOptimizer,
    Slo,
    build_model,
    run_at,
    slo_rate,
    unit_trace,
)
from shared_core.cli import ReproduceArgs, progress, reproduce_main
from shared_core.report import Report

SLO = Slo(tbt_s=0.05, ttft_s=3.0)
LIGHT_RATE = 1.0  # conversation requests/s: a fraction of one H100's capacity
HEAVY_RATE = 6.0  # Mooncake requests/s: past the aggregated baseline's SLO-compliant rate
TUNED_BUDGETS = (512, 1024, 2048)
PAPER_RATIO = 2.72 / 2.14  # Mooncake peak load, DuetServe vs vLLM (paper, via the review)


def _mean_se(xs: Sequence[float]) -> tuple[float, float]:
    a = np.asarray(xs, dtype=float)
    se = float(a.std(ddof=1) / math.sqrt(a.size)) if a.size > 1 else math.nan
    return float(a.mean()), se


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
    report: Report, name: str, ours: list[float], base: list[float], base_name: str, note: str = ""
) -> dict[str, float]:
    """Claim ``ours`` sustains a higher SLO rate than ``base``: the paired per-seed ratio's mean
    minus two standard errors must exceed 1."""
    ratios = [
        o / b if b > 0 else (math.inf if o > 0 else math.nan)
        for o, b in zip(ours, base, strict=True)
    ]
    finite = [r for r in ratios if math.isfinite(r)]
    mean_r, se_r = _mean_se(finite) if finite else (math.nan, math.nan)
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
        note=f"paired ratio {mean_r:.3f} ± {2 * se_r:.3f} (2 s.e.), held when "
        f"ratio - 2 s.e. > 1. {note}".strip(),
    )
    return {"ratio": mean_r, "ratio_2se": 2 * se_r}


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
    sats = args.pick(
        smoke=[0.35], quick=[0.25, 0.35, 0.5, 1.0], full=[0.2, 0.25, 0.35, 0.5, 0.75, 1.0]
    )
    main = ("Qwen3-8B", 0.35, "mooncake")
    rows: list[dict[str, Any]] = []

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

    # 1. The bandwidth-saturation sweep: Qwen3-8B, Mooncake.
    sweep: dict[float, dict[str, list[float]]] = {}
    for sat in sats:
        sweep[sat] = {p: r.rates("Qwen3-8B", sat, "mooncake", p) for p in ("aggregated", "duet")}
        for p, v in sweep[sat].items():
            add("Qwen3-8B", sat, "mooncake", p, v)
        _rate_claim(
            report,
            f"Mooncake Qwen3-8B, B(n) saturating at {sat:.0%} of SMs: DuetServe "
            "sustains a higher SLO rate than aggregated chunked prefill",
            sweep[sat]["duet"],
            sweep[sat]["aggregated"],
            "aggregated (8192-token budget)",
            note=f"paper: {PAPER_RATIO:.2f}x over vLLM on Mooncake.",
        )
    agg, duet = sweep[0.35]["aggregated"], sweep[0.35]["duet"]

    # 2. Other baselines and the ablations, at the main setting.
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
        "duet without spatial": r.rates(*main, "duet", ablation="no_spatial", variant="no-spatial"),
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
    )
    _rate_claim(
        report,
        "Mooncake Qwen3-8B: DuetServe beats 1P+1D disaggregation per GPU",
        duet,
        others["disaggregated"],
        "disaggregated (per GPU)",
    )
    _rate_claim(
        report,
        "Control: DuetServe beats its own ablation without spatial execution "
        "(TBT-aware chunk cap only)",
        duet,
        others["duet without spatial"],
        "duet, spatial off",
        note="if not held, the gain comes from chunk sizing, not SMs.",
    )

    # 3. The larger model, the bursty trace, the shifting mix.
    for model, workload, base_policy in (
        ("Qwen3-14B", "mooncake", "aggregated"),
        ("Qwen3-8B", "bursty", "aggregated"),
        ("Qwen3-8B", "shifting", "static_spatial"),
    ):
        ours = r.rates(model, 0.35, workload, "duet")
        base = r.rates(model, 0.35, workload, base_policy)
        add(model, 0.35, workload, "duet", ours)
        add(model, 0.35, workload, base_policy, base)
        what = (
            "a static 50/50 split loses when the mix shifts"
            if base_policy == "static_spatial"
            else f"DuetServe sustains a higher SLO rate than {base_policy}"
        )
        _rate_claim(report, f"{workload} {model}: {what}", ours, base, base_policy)

    # 4. Fixed loads: light (DuetServe ~ aggregated) and heavy (TBT and throughput).
    light = {
        p: r.fixed("Qwen3-8B", 0.35, "conversation", LIGHT_RATE, p) for p in ("aggregated", "duet")
    }
    heavy = {p: r.fixed(*main, HEAVY_RATE, p) for p in ("aggregated", "duet", "static_spatial")}
    heavy["duet, random split"] = r.fixed(
        *main, HEAVY_RATE, "duet", ablation="random_split", variant="random-split"
    )
    fixed_rows = []
    for label, runs in [
        (f"light {LIGHT_RATE} req/s conversation", light),
        (f"heavy {HEAVY_RATE} req/s Mooncake", heavy),
    ]:
        for policy, res in runs.items():
            fixed_rows.append(
                {
                    "load": label,
                    "policy": policy,
                    **{k: float(np.mean([x[k] for x in res])) for k in res[0]},
                }
            )
    n = len(r.seeds)

    def mean(runs: list[dict[str, float]], key: str) -> float:
        return float(np.mean([x[key] for x in runs]))

    agg_light = mean(light["aggregated"], "tokens_per_s_per_gpu")
    report.claim(
        "Light load: DuetServe's throughput equals aggregated's (within 2 %)",
        "output tokens/s per GPU",
        mean(light["duet"], "tokens_per_s_per_gpu"),
        agg_light,
        direction="close",
        tolerance=0.02 * agg_light,
        baseline_name="aggregated",
        samples=n,
    )
    report.claim(
        "Light load: DuetServe runs mostly aggregated (<= 10 % spatial iterations)",
        "fraction of spatial iterations",
        mean(light["duet"], "spatial_fraction"),
        0.10,
        direction="lower",
        baseline_name="10 % bound",
        samples=n,
    )
    report.claim(
        f"Heavy load: aggregated breaks the {SLO.tbt_s * 1e3:.0f} ms P99 TBT SLO",
        "P99 TBT (ms)",
        mean(heavy["aggregated"], "p99_tbt_ms"),
        SLO.tbt_s * 1e3,
        direction="higher",
        baseline_name="SLO",
        samples=n,
    )
    report.claim(
        "Heavy load: DuetServe meets the P99 TBT SLO",
        "P99 TBT (ms)",
        mean(heavy["duet"], "p99_tbt_ms"),
        SLO.tbt_s * 1e3,
        direction="lower",
        baseline_name="SLO",
        samples=n,
    )
    report.claim(
        "Heavy load: DuetServe's throughput is higher than aggregated's",
        "output tokens/s per GPU",
        mean(heavy["duet"], "tokens_per_s_per_gpu"),
        mean(heavy["aggregated"], "tokens_per_s_per_gpu"),
        direction="higher",
        baseline_name="aggregated",
        samples=n,
        note="paper: up to 1.3x total throughput.",
    )
    report.claim(
        "Control: the optimizer's split beats a random feasible split",
        "output tokens/s per GPU",
        mean(heavy["duet"], "tokens_per_s_per_gpu"),
        mean(heavy["duet, random split"], "tokens_per_s_per_gpu"),
        direction="higher",
        baseline_name="random split",
        samples=n,
    )
    if 1.0 in sweep:
        ratio = [d / a if a > 0 else math.nan for d, a in zip(duet, agg, strict=True)]
        ratio1 = [
            d / a if a > 0 else math.nan
            for d, a in zip(sweep[1.0]["duet"], sweep[1.0]["aggregated"], strict=True)
        ]
        report.claim(
            "Control: without bandwidth saturation (B(n) linear) the advantage shrinks",
            "DuetServe / aggregated SLO-rate ratio",
            float(np.nanmean(ratio1)),
            float(np.nanmean(ratio)),
            direction="lower",
            baseline_name="saturating at 35 %",
            samples=n,
            note="the paper's premise is what makes small decode partitions pay.",
        )

    report.table("slo_rates", rows)
    report.table("fixed_loads", fixed_rows)
    r.bar.close()
    _figures(report, rows, r.curves)
    return report


def _figures(
    report: Report, rows: list[dict[str, Any]], curves: dict[str, list[dict[str, float]]]
) -> None:
    from shared_core.report import subplots

    fig, ax = subplots(figsize=(5, 3.5))
    for policy in ("aggregated", "duet"):
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


def main(argv: Sequence[str] | None = None) -> int:
    return reproduce_main(run, argv, description=__doc__ or "")


if __name__ == "__main__":
    raise SystemExit(main())
