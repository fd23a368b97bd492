"""The experiments of the reproduction: the model zoo at matched size, one training run, the scaling timer.

Kept apart from ``reproduce.py`` (claims and figures) so that each step is a plain function of its
settings, cached by the report.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from spu_dna.baselines import CNNClassifier, HyenaClassifier, MambaClassifier, TransformerClassifier
from spu_dna.configuration import SPUConfig
from spu_dna.data.synthetic import Task, long_range_task, motif_task, periodic_task
from spu_dna.modeling import SPUForSequenceClassification
from spu_dna.training import Protocol, evaluate, fit

__all__ = ["ABLATIONS", "BASELINE_NAMES", "MODELS", "TASKS", "build", "run_one", "time_fwd_bwd"]

TASKS: dict[str, Callable[..., Task]] = {
    "motif": motif_task,
    "long_range": long_range_task,
    "periodic": periodic_task,
}
ABLATIONS: dict[str, dict[str, Any]] = {"SPU": {}, "SPU -LPL": {"use_lpl": False}, "SPU -DPL-freq": {"use_dpl_freq": False},
             "SPU -SPL": {"use_spl": False}}  # fmt: skip
BASELINE_NAMES = ("CNN", "Transformer", "Hyena", "Mamba")
MODELS = (*ABLATIONS, *BASELINE_NAMES)


def build(name: str, length: int, d_model: int = 64) -> nn.Module:
    """Model ``name`` at about 60-180 k parameters for sequences of ``length``."""
    if name in ABLATIONS:
        config = SPUConfig(
            d_model=d_model, n_layers=2, lpl_groups=8, dpl_max_len=length, dropout=0.0,
            **ABLATIONS[name],
        )  # fmt: skip
        return SPUForSequenceClassification(config)
    if name == "CNN":
        return CNNClassifier(d_model=d_model)
    if name == "Transformer":
        return TransformerClassifier(d_model=d_model, n_layers=2)
    if name == "Hyena":
        return HyenaClassifier(d_model=d_model, n_layers=2)
    if name == "Mamba":
        # state 4: transformers' CPU scan holds (batch, 2d, length, state) tensors
        return MambaClassifier(d_model=d_model, n_layers=2, state_size=4)
    raise ValueError(f"unknown model {name!r}; choose from {MODELS}")


def run_one(model_name: str, task_name: str, settings: dict[str, Any], seed: int) -> dict[str, Any]:
    """Train ``model_name`` on a fresh draw of ``task_name`` and score it on held-out sequences."""
    length, n_train, n_test = settings["length"], settings["n_train"], settings["n_test"]
    options = settings.get("task_options", {}).get(task_name, {})
    data = TASKS[task_name](n=n_train + n_test, length=length, seed=seed, **options)
    train, test = data.split(n_train)
    torch.manual_seed(seed)
    model = build(model_name, length)
    protocol = Protocol(
        lr=settings["lr"], epochs=settings["epochs"], batch_size=settings["batch"],
        warmup=settings.get("warmup", Protocol.warmup),
    )  # fmt: skip
    seconds = fit(model, train, protocol, seed=seed)
    scores = evaluate(model, test)
    scores.update(
        seconds_per_epoch=statistics.mean(seconds),
        params=sum(p.numel() for p in model.parameters()),
    )
    if model_name == "SPU" and task_name == "motif":
        # the saliency figure: a few positive test sequences with their planted sites
        positives = [i for i in range(len(test)) if test.labels[i] == 1][:4]
        with torch.no_grad():
            out = model(input_ids=test.input_ids()[positives])
        scores["saliency"] = out.saliency[-1].tolist()
        scores["sites"] = [int(test.sites[i]) for i in positives] if test.sites is not None else []
    return scores


def time_fwd_bwd(name: str, length: int, batch: int, repeats: int) -> float:
    """Median seconds of one forward + backward of model ``name`` on random sequences."""
    torch.manual_seed(0)
    model = build(name, length)
    ids = torch.randint(5, 9, (batch, length))
    labels = torch.randint(0, 2, (batch,))
    times = []
    for i in range(repeats + 1):
        start = time.perf_counter()
        model(input_ids=ids, labels=labels).loss.backward()
        if i:  # the first call warms allocator and caches
            times.append(time.perf_counter() - start)
    return statistics.median(times)
