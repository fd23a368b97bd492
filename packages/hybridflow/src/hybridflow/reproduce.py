"""Reproduce HybridFlow's systems claims at CPU scale: ``python -m hybridflow.reproduce [--quick|--full]``.

Simulated edge and cloud models serve synthetic arithmetic DAG tasks over OpenAI-compatible HTTP on
127.0.0.1 (time scaled down); the router is trained on simulated profiles. Claims: the DAG's latency
saving over the chain equals the latency model's 1 - critical path / sum of steps; HybridFlow is
faster than its chain ablation and cheaper than sending every subtask to the cloud; the adaptive
router dominates the fixed-threshold accuracy-cost curve (with the official utility label, and with
the accuracy gain alone); accuracy lies between edge-only and cloud-only. The fixture's ceiling is a
threshold on the TRUE difficulty. Negative controls: a one-worker DAG, a random router, routers
trained on shuffled labels.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from hybridflow.routing_study import THRESHOLDS, StudyConfig
from shared_core.cli import ReproduceArgs, progress, reproduce_main
from shared_core.report import Report

# The router sweeps run in-process on the simulated clock (VirtualTimeLoop, model time unscaled), so
# r_L (elapsed / L_max) reads model time whatever the machine's load, and they cost no sleeping. The
# latency arms measure real scheduling on the wall clock with time scaled down, so model time stays
# well above the event loop's own cost; one of them also runs over loopback HTTP (the openai SDK).
SIM_SCALE = 0.05
SMOKE_SCALE = 0.01
B_MAX = (384, 768, 1536, 2048, 3072, 8192)
BOOT = 300
DEFAULT_B = 2048  # the official inference default of B_max
# The router claims (held-out tau/delta0, several seeds) are in hybridflow.routing_study.
SEEDS = 3


def _flow(eps: dict[str, Any], router: Any, scale: float, **kw: Any) -> Any:
    from hybridflow.pipeline import HybridFlow

    return HybridFlow(
        eps["edge"], eps["cloud"], router, planner=eps["planner"], time_scale=scale, seed=0, **kw
    )


def _modules() -> list[Any]:
    import hybridflow.accounting
    import hybridflow.client
    import hybridflow.embedders
    import hybridflow.endpoints
    import hybridflow.experiments
    import hybridflow.pipeline
    import hybridflow.plan
    import hybridflow.planners
    import hybridflow.router
    import hybridflow.sim
    import hybridflow.tokens
    import hybridflow.training

    return [hybridflow.accounting, hybridflow.client, hybridflow.embedders, hybridflow.endpoints,
            hybridflow.experiments, hybridflow.pipeline, hybridflow.plan, hybridflow.planners,
            hybridflow.router, hybridflow.sim, hybridflow.tokens, hybridflow.training]  # fmt: skip


def _models() -> dict[str, Any]:
    from hybridflow.sim import CLOUD, EDGE, PLANNER

    return {m.name: m for m in (EDGE, CLOUD, PLANNER)}


def _sweep_routers(args: ReproduceArgs, routers: dict[str, Any]) -> dict[str, Any]:
    from hybridflow.router import ConstantRouter, ThresholdRouter, UtilityRouter

    settings: dict[str, Any] = {}
    for t in args.pick(smoke=(3, 6, 10), quick=THRESHOLDS, full=THRESHOLDS):
        settings[f"fixed t={t}"] = ThresholdRouter(t)
    for b in args.pick(smoke=(768, DEFAULT_B), quick=B_MAX, full=B_MAX):
        emb = routers["adaptive"].embedder
        settings[f"adaptive B={b}"] = UtilityRouter.load(routers["path"], emb, b_max=b)
    settings["HF all-edge"] = ConstantRouter("edge")
    settings["HF all-cloud"] = ConstantRouter("cloud")
    for frac in (0.25, 0.5, 0.75):
        calib = [x.query for x in routers["calib"]]
        settings[f"query router {frac:.0%}"] = copy.copy(routers["query"]).calibrate(calib, frac)
    settings["edge-only (direct)"] = _direct("edge", routers)
    settings["cloud-only (direct)"] = _direct("cloud", routers)
    return settings


def _direct(target: str, routers: dict[str, Any]) -> Any:
    """A query router pinned to one model: the whole query answered directly (chain of thought)."""
    return copy.copy(routers["query"]).with_threshold(-np.inf if target == "cloud" else np.inf)


def _sim_arms(
    arms: dict[str, tuple[Any, dict[str, Any]]],
    eps: dict[str, Any],
    tasks: list[Any],
    scale: float,
    desc: str,
    concurrency: int,
    virtual: bool = False,
) -> dict[str, Any]:
    from hybridflow.experiments import run_arm
    from hybridflow.sim import sim_client_factory

    factory = sim_client_factory(_models(), time_scale=scale)
    out = {}
    for name, (router, kw) in progress(arms.items(), desc=desc, total=len(arms)):
        flow = _flow(eps, router, scale, client_factory=factory, **kw)
        out[name] = run_arm(flow, tasks, concurrency=concurrency, time_scale=scale, virtual=virtual)
    return out


def _latency_arms(
    eps: dict[str, Any], tasks: list[Any], routers: dict[str, Any], scale: float
) -> dict[str, Any]:
    from hybridflow.experiments import run_arm
    from hybridflow.router import ThresholdRouter

    arms: dict[str, tuple[Any, dict[str, Any]]] = {
        "HybridFlow (adaptive)": (routers["adaptive"], {"max_workers": 8}),
        "HybridFlow (fixed t=5)": (ThresholdRouter(5), {"max_workers": 8}),
        "HybridFlow-Chain (fixed t=5)": (ThresholdRouter(5), {"max_workers": 8, "chain": True}),
        "control: DAG, 1 worker (fixed t=5)": (ThresholdRouter(5), {"max_workers": 1}),
        "cloud-only (direct)": (_direct("cloud", routers), {}),
        "edge-only (direct)": (_direct("edge", routers), {}),
    }
    out = _sim_arms(arms, eps, tasks, scale, "latency arms", concurrency=4)
    # The real client path: the same arm over loopback HTTP to the simulated server.
    http = _flow(eps, ThresholdRouter(5), scale, max_workers=8)
    out["HybridFlow (fixed t=5), loopback HTTP"] = run_arm(
        http, tasks, concurrency=2, time_scale=scale
    )
    return out


def _experiment(args: ReproduceArgs) -> dict[str, Any]:
    from hybridflow.experiments import profiles_for, query_router, train_router
    from hybridflow.sim import LocalServer, make_tasks, sim_app, sim_endpoints

    n_train = args.pick(smoke=12, quick=500, full=2000)
    n_eval = args.pick(smoke=4, quick=200, full=2000)
    n_lat = args.pick(smoke=3, quick=24, full=100)
    train_tasks = make_tasks(n_train, seed=1000 + args.seed)
    eval_tasks = make_tasks(n_eval, seed=2000 + args.seed)
    lat_tasks = make_tasks(n_lat, seed=3000 + args.seed)
    profiles = profiles_for(train_tasks)
    epochs = args.pick(smoke=2, quick=30, full=30)
    adaptive = train_router(profiles, seed=args.seed, epochs=epochs)
    ckpt = args.out / "checkpoints"
    ckpt.mkdir(parents=True, exist_ok=True)
    routers = {
        "adaptive": adaptive,
        "path": adaptive.save(ckpt / "router.npz"),
        "query": query_router(train_tasks, args.seed),
        "calib": train_tasks,
    }
    scale = args.pick(smoke=SMOKE_SCALE, quick=SIM_SCALE, full=SIM_SCALE)
    with LocalServer(sim_app(_models(), seed=0, time_scale=scale)) as server:
        eps = sim_endpoints(server)
        settings = {k: (r, {"max_workers": 8}) for k, r in _sweep_routers(args, routers).items()}
        sweeps = _sim_arms(
            settings, eps, eval_tasks, 1.0, "sweep arms", concurrency=8, virtual=True
        )
        latency = _latency_arms(eps, lat_tasks, routers, scale)
    history = adaptive.history_
    return {
        "sweeps": sweeps,
        "latency": latency,
        "n_profiles": len(profiles),
        "train_loss": [history[0], history[-1]],
    }


# -- claims --------------------------------------------------------------------------------------
def _curve(sweeps: dict[str, Any], prefix: str) -> list[tuple[float, float]]:
    return [
        (float(np.mean(arm["cloud_tokens"])), float(np.mean(arm["correct"])))
        for name, arm in sweeps.items()
        if name.startswith(prefix)
    ]


def _best_utility(
    sw: dict[str, Any], prefix: str, ref: float, idx: np.ndarray | None = None
) -> float:
    """The highest utility over the arms of one sweep (on the queries ``idx``)."""
    best = -np.inf
    for name, arm in sw.items():
        if name.startswith(prefix):
            correct, tokens = np.asarray(arm["correct"]), np.asarray(arm["cloud_tokens"])
            if idx is not None:
                correct, tokens = correct[idx], tokens[idx]
            best = max(best, float(correct.mean() - 0.5 * tokens.mean() / ref))
    return float(best)


def _utility_gap(sw: dict[str, Any], ref: float, seed: int) -> tuple[float, float]:
    """Best adaptive minus best fixed utility, and its paired-bootstrap s.e. over queries."""
    n = len(sw["HF all-cloud"]["correct"])
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(BOOT):
        idx = rng.integers(0, n, n)
        boots.append(_best_utility(sw, "adaptive", ref, idx) - _best_utility(sw, "fixed", ref, idx))
    return _best_utility(sw, "adaptive", ref) - _best_utility(sw, "fixed", ref), float(
        np.std(boots)
    )


def _utility(arm: dict[str, Any], cloud_ref: float) -> float:
    """[GUESS] utility: accuracy - 0.5 * cloud tokens relative to sending every subtask to the cloud."""
    return float(np.mean(arm["correct"]) - 0.5 * np.mean(arm["cloud_tokens"]) / cloud_ref)


def _se(values: Sequence[float]) -> float:
    x = np.asarray(values, dtype=float)
    return float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("nan")


def _claim_latency(report: Report, lat: dict[str, Any]) -> None:
    from hybridflow.experiments import predicted_saving

    dag, chain, one = (
        lat["HybridFlow (fixed t=5)"],
        lat["HybridFlow-Chain (fixed t=5)"],
        lat["control: DAG, 1 worker (fixed t=5)"],
    )
    n = len(dag["correct"])
    # JSON (the checkpoint) turned the step IDs into strings
    execs = [{int(k): v for k, v in e.items()} for e in chain["step_exec_s"]]
    predicted = [predicted_saving(p, e) for p, e in zip(dag["plans"], execs, strict=False)]
    measured = [1 - d / c for d, c in zip(dag["step_span_s"], chain["step_span_s"], strict=False)]
    control = [1 - d / c for d, c in zip(one["step_span_s"], chain["step_span_s"], strict=False)]
    tol = max(0.05, 2 * _se(list(np.subtract(measured, predicted))))
    report.claim("dag_saving_equals_latency_model", "step-phase latency saving vs Chain", float(np.nanmean(measured)),
                 float(np.nanmean(predicted)), direction="close", baseline_name="1 - critical path / sum of steps",
                 tolerance=tol, samples=n, note="per-query steps measured in the chain run give the model's prediction")  # fmt: skip
    report.claim("control_one_worker_dag_saving_equals_model", "step-phase saving, DAG with max_workers=1",
                 float(np.nanmean(control)), float(np.nanmean(predicted)), direction="close",
                 baseline_name="1 - critical path / sum of steps", tolerance=tol, samples=n,
                 note="negative control: without parallel workers the DAG cannot save; expected not held")  # fmt: skip
    http = lat["HybridFlow (fixed t=5), loopback HTTP"]
    cloud_note = (
        f"cloud tokens {np.mean(http['cloud_tokens']):.1f} vs {np.mean(dag['cloud_tokens']):.1f}"
    )
    report.claim("http_path_equals_simulation", "accuracy over loopback HTTP (openai SDK)",
                 float(np.mean(http["correct"])), float(np.mean(dag["correct"])), direction="close",
                 tolerance=0.0, baseline_name="in-process simulated clients", samples=n,
                 note=f"same draws and routes either way; {cloud_note}")  # fmt: skip
    report.claim("latency_lower_than_chain", "end-to-end latency (s, unscaled)", float(np.mean(dag["latency_s"])),
                 float(np.mean(chain["latency_s"])), direction="lower", baseline_name="HybridFlow-Chain", samples=n,
                 note="paper: -28.5% vs the best collaborative baseline (direction only)")  # fmt: skip


def _claim_routing(report: Report, sw: dict[str, Any], seed: int) -> None:
    n = len(sw["HF all-cloud"]["correct"])
    ref = float(np.mean(sw["HF all-cloud"]["cloud_tokens"]))
    diff, se = _utility_gap(sw, ref, seed)
    report.claim("adaptive_best_utility_above_fixed", "best utility over the sweep [GUESS definition]",
                 _best_utility(sw, "adaptive", ref), _best_utility(sw, "fixed", ref), direction="higher",
                 baseline_name="best fixed threshold", held=bool(diff > 2 * se), samples=n,
                 note=f"held if the gap {diff:.4f} exceeds 2 s.e. ({se:.4f}, paired bootstrap over queries); "
                      "paper: 0.7940 vs 0.6329 (its utility definition is not known here)")  # fmt: skip
    hf = sw[f"adaptive B={DEFAULT_B}"]
    report.claim("accuracy_above_edge_only", "accuracy", float(np.mean(hf["correct"])), float(np.mean(sw["edge-only (direct)"]["correct"])),
                 direction="higher", baseline_name="edge-only (direct)", samples=n)  # fmt: skip
    report.claim("accuracy_at_most_cloud_only", "accuracy", float(np.mean(hf["correct"])), float(np.mean(sw["cloud-only (direct)"]["correct"])),
                 direction="lower", baseline_name="cloud-only (direct)", samples=n,
                 note="paper: 55.34% vs 58.99% for cloud-only CoT")  # fmt: skip
    report.claim("cost_lower_than_all_cloud_subtasks", "API cost per query (US$)", float(np.mean(hf["cost_usd"])),
                 float(np.mean(sw["HF all-cloud"]["cost_usd"])), direction="lower", baseline_name="every subtask on the cloud",
                 samples=n, note="paper: -31.3% API cost vs the best collaborative baseline (direction only)")  # fmt: skip
    report.claim("cost_lower_than_cloud_only_direct", "API cost per query (US$)", float(np.mean(hf["cost_usd"])),
                 float(np.mean(sw["cloud-only (direct)"]["cost_usd"])), direction="lower", baseline_name="cloud-only (direct CoT)",
                 samples=n, note="the whole query answered directly by the cloud model, no plan")  # fmt: skip


_STUDY_CLAIMS = (
    ("adaptive", "adaptive_dominates_fixed_threshold", "the router with the official label (lambda_t 0.5, lambda_k 0.001)"),
    ("qlabel", "quality_label_router_dominates_fixed", "the router trained on the accuracy gain alone (lambda_t = lambda_k = 0)"),
    ("random", "control_random_router_dominates_fixed", "negative control (p 0.2/0.5/0.8, not tuned); expected not held"),
    ("shuffled", "control_shuffled_label_router_dominates_fixed", "negative control: the official-label router trained on permuted quality labels; expected not held"),
    ("qshuffled", "control_quality_label_shuffled_dominates_fixed", "negative control: the quality-label router trained on permuted labels; expected not held"),
)  # fmt: skip


def _claim_study(report: Report, study: list[dict[str, Any]]) -> None:
    """Router claims over seeds: per seed the mean gain at equal cloud tokens over the fixed points in
    the router's range (tau and delta0 chosen on validation), then mean and s.e. across seeds."""
    from hybridflow.routing_study import across_seeds, gains_at, seed_gains

    for prefix, name, what in _STUDY_CLAIMS:
        per = [seed_gains(r, prefix) for r in study]
        gain, se = across_seeds([g for g, _, _ in per])
        ceil, ceil_se = across_seeds([c for _, c, _ in per])
        held = bool(gain > 2 * se) if np.isfinite(se) else False
        picks = "; ".join(
            f"seed {r['seed']}: tau {r['chosen'][prefix]['tau']}, {len(r['chosen'][prefix]['delta0'])} delta0 "
            f"(val gain {r['chosen'][prefix]['val_gain']:+.4f})"
            for r in study
            if prefix in r["chosen"]
        )
        report.claim(name, "mean accuracy gain at equal cloud tokens (test tasks)", gain, 0.0,
                     direction="higher", baseline_name="fixed-threshold curve", held=held, samples=len(study),
                     note=f"{what}; per-seed gains {', '.join(f'{g:+.4f}' for g, _, _ in per)}, s.e. {se:.4f} "
                          f"across {len(study)} seeds; fixed points in range {[k for _, _, k in per]}; the ceiling "
                          f"over the same points {ceil:+.4f} (s.e. {ceil_se:.4f}); {picks}")  # fmt: skip
    interior = []
    for r in study:
        fixed = {k: tuple(v) for k, v in r["test"].items() if k.startswith("fixed")}
        ends = {min(fixed, key=lambda k: fixed[k][0]), max(fixed, key=lambda k: fixed[k][0])}
        oracle = [tuple(v) for k, v in r["test"].items() if k.startswith("oracle ")]
        g = gains_at(oracle, {k: v for k, v in fixed.items() if k not in ends})
        # nan (and so not held) where the ceiling's range misses every interior point (--smoke)
        interior.append(float(np.mean(list(g.values()))) if g else float("nan"))
    gain, se = across_seeds(interior)
    report.claim("ceiling_true_difficulty_threshold_dominates_fixed", "mean accuracy gain at equal cloud tokens (test tasks)",
                 gain, 0.0, direction="higher", baseline_name="fixed-threshold curve",
                 held=bool(gain > 2 * se) if np.isfinite(se) else False, samples=len(study),
                 note=f"the fixture's headroom: a threshold on the TRUE difficulty, over the interior fixed points "
                      f"(the two ends are equal by construction); per-seed {', '.join(f'{g:+.4f}' for g in interior)}, "
                      f"s.e. {se:.4f} across seeds")  # fmt: skip


def _study(args: ReproduceArgs) -> list[dict[str, Any]]:

    from hybridflow.routing_study import run_study

    k = args.pick(smoke=2, quick=SEEDS, full=5)
    smoke: dict[str, Any] = {
        "thresholds": (3, 6, 10),
        "delta0_grid": (0.3, 0.5),
        "random_p": (0.2, 0.8),
    }
    cfgs = [
        StudyConfig(args.seed + i, n_train=args.pick(smoke=12, quick=250, full=2000),
                    n_val=args.pick(smoke=3, quick=50, full=400), n_test=args.pick(smoke=4, quick=120, full=1000),
                    epochs=args.pick(smoke=2, quick=30, full=30), **(smoke if args.size == "smoke" else {}))
        for i in range(k)
    ]  # fmt: skip
    workers = 1 if args.size == "smoke" else k  # niced; the seeds' CPU is what it is either way
    return run_study(cfgs, workers)


def _figures(report: Report, sw: dict[str, Any], study: list[dict[str, Any]]) -> None:
    from shared_core.report import subplots

    fig, ax = subplots(figsize=(6, 4))
    test = study[0]["test"]
    for prefix, style in (("fixed", "o-"), ("oracle", "^-."), ("adaptive", "s-"), ("qlabel", "v-"),
                          ("random", "x--"), ("shuffled", "d:"), ("qshuffled", "<:")):  # fmt: skip
        pts = sorted(tuple(v) for k, v in test.items() if k.startswith(prefix + " "))
        ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=prefix)
    for name in ("edge-only (direct)", "cloud-only (direct)"):
        ax.plot(
            np.mean(sw[name]["cloud_tokens"]), np.mean(sw[name]["correct"]), "*", ms=12, label=name
        )
    ax.set_xlabel("cloud tokens per query")
    ax.set_ylabel("accuracy")
    ax.legend(fontsize=7)
    report.figure(
        "accuracy_cost",
        fig,
        f"Accuracy against cloud tokens on seed {study[0]['seed']}'s test tasks (tau and delta0 chosen "
        "on validation); direct single-model answers from the seed-0 sweep",
    )


def run(args: ReproduceArgs) -> Report:
    report = Report(
        "hybridflow",
        "HybridFlow: Resource-Adaptive Subtask Routing for Efficient Edge-Cloud LLM Inference",
        args.out,
        {"size": args.size, "seed": args.seed},
    )
    # Keyed on the experiment's code (not the claims below): editing a claim reuses the runs.
    code = [
        _experiment,
        _sweep_routers,
        _sim_arms,
        _latency_arms,
        _direct,
        _flow,
        _models,
        *_modules(),
    ]
    import concurrent.futures

    import hybridflow.routing_study

    # The router study runs its seeds in worker processes; the seed-0 sweep and the latency arms
    # run here meanwhile.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(
            report.cached, "routing-study", lambda: _study(args),
            code=[_study, hybridflow.routing_study, *_modules()],
        )  # fmt: skip
        result = report.cached("experiment", lambda: _experiment(args), code=code)
        study = pending.result()
    sw, lat = result["sweeps"], result["latency"]
    report.table("routing_choices", [
        {"seed": r["seed"], "router": arm, "tau": c["tau"], "delta0": " ".join(map(str, c["delta0"])),
         "validation_gain": round(c["val_gain"], 4)}
        for r in study for arm, c in r["chosen"].items()
    ])  # fmt: skip
    ref = float(np.mean(sw["HF all-cloud"]["cloud_tokens"]))
    rows = [
        {
            "arm": k,
            **{m: round(v, 4) for m, v in _summary(a).items()},
            "utility": round(_utility(a, ref), 4),
        }
        for k, a in sw.items()
    ]
    report.table("accuracy_cost_sweep", rows)
    report.table(
        "latency_arms",
        [{"arm": k, **{m: round(v, 4) for m, v in _summary(a).items()}} for k, a in lat.items()],
    )
    report.table(
        "router_training",
        [
            {
                "profiles": result["n_profiles"],
                "loss_first_epoch": result["train_loss"][0],
                "loss_last_epoch": result["train_loss"][1],
            }
        ],
    )
    _claim_latency(report, lat)
    _claim_study(report, study)
    _claim_routing(report, sw, args.seed)
    _figures(report, sw, study)
    return report


def _summary(arm: dict[str, Any]) -> dict[str, float]:
    return {
        "accuracy": float(np.mean(arm["correct"])),
        "cloud_tokens": float(np.mean(arm["cloud_tokens"])),
        "cost_usd": float(np.mean(arm["cost_usd"])),
        "latency_s": float(np.mean(arm["latency_s"])),
        "failed": float(arm["failed"]),
    }


def main(argv: Sequence[str] | None = None) -> int:
    return reproduce_main(run, argv, description=__doc__ or "")


if __name__ == "__main__":
    raise SystemExit(main())
