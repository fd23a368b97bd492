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
