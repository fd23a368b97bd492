"""Many independent meta-training jobs (seeds × M × methods) through joblib.

``run_jobs(fn, jobs, n_jobs=2)`` maps a picklable ``fn(**job)`` over ``jobs`` with joblib's loky
backend; any joblib backend works (``backend="dask"`` or ``"ray"`` with their joblib plugins
registered, for a cluster). Results are returned in the order of ``jobs``, so a parallel run equals
a sequential one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any


def run_jobs(
    fn: Callable[..., Any],
    jobs: Sequence[Mapping[str, Any]],
    n_jobs: int = 1,
    backend: str = "loky",
    threads_per_job: int = 1,
) -> list[Any]:
    """``[fn(**job) for job in jobs]``, in parallel when ``n_jobs != 1``."""
    if n_jobs == 1:
        return [fn(**job) for job in jobs]
    from joblib import Parallel, delayed, parallel_config

    with parallel_config(backend=backend, inner_max_num_threads=threads_per_job):
        return Parallel(n_jobs=n_jobs)(delayed(fn)(**job) for job in jobs)


def tiny_training_job(
    seed: int,
    winds: Sequence[float] = (1.0, 3.0, 5.0),
    n_refs: int = 3,
    steps: int = 1,
    hidden: tuple[int, int] = (4, 4),
) -> list[list[float]]:
    """One small Wasserstein-dual meta-training job; returns the trained state dict as lists.

    Lives in the package (not in a test module) so that loky workers can unpickle it by name: the
    two-process check of :func:`run_jobs` and a quick smoke test of a cluster backend use it.
    """
    import torch

    import wasserstein_meta as wm
    from wasserstein_meta.potentials import WassersteinBregman

    torch.manual_seed(seed)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # the same numbers in a worker as in the parent
    try:
        plant = wm.systems.PFAR()
        refs = wm.trajectories.random_splines(n_refs, T=1.0, knot_scale=0.3, seed=0)
        ens = wm.OracleEnsemble(plant, list(winds))
        pot = WassersteinBregman("ensemble", lam=1.0, Q=1.0, mode="dual")
        feats = wm.MLPFeatures(6, hidden, seed=seed)
        ctrl = wm.AdaptiveController(plant, feats, pot, wm.PDGains(3, 1.0, 5.0, 5.0)).double()
        wm.meta_train(
            ctrl, ens, refs, steps=steps, lr=1e-2, seed=seed, T=0.4, dt=0.1, integrator="heun"
        )
    finally:
        torch.set_default_dtype(previous)
    return [v.tolist() for v in ctrl.state_dict().values()]
