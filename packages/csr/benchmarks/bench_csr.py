"""Benchmarks of contrastive-sr against its peers, each a ratio measured in one run.

    python packages/csr/benchmarks/bench_csr.py [--quick]

1. Leave-one-out K selection (every K = 1..30 from one neighbour query) against naive
   leave-one-out with scikit-learn's ``KNeighborsRegressor`` (one pass per K: n fits) and against
   ``GridSearchCV`` over K = 1..30 (5-fold), on diabetes (n = 442).
2. The closed-form contrastive W against torch Adam (500 steps) on the same objective: time, and
   the objective each reaches.
3. The contrastive normal equations from moments against upstream's explicit B.
4. A whole fit against gplearn's ``SymbolicRegressor`` at an equal number of evaluations, on
   ``make_friedman1``: time and test R².
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from threadpoolctl import threadpool_limits

from shared_core.bench import compare


def loo_k(quick: bool) -> dict:
    from contrastive_sr import LOOKNeighborsRegressor
    from sklearn.datasets import load_diabetes
    from sklearn.model_selection import GridSearchCV, LeaveOneOut, cross_val_predict
    from sklearn.neighbors import KNeighborsRegressor

    X, y = load_diabetes(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    ks = range(1, 31)

    def ours():
        return LOOKNeighborsRegressor(k_max=30).fit(X, y).n_neighbors_

    def naive_one_k():
        return cross_val_predict(KNeighborsRegressor(5), X, y, cv=LeaveOneOut())

    def grid():
        return GridSearchCV(KNeighborsRegressor(), {"n_neighbors": list(ks)}, cv=5).fit(X, y)

    # (equality of the chosen K with naive leave-one-out over every K is a test:
    # tests/test_neighbors.py; timing all 30 naive passes here would take minutes)
    reps = 3 if quick else 7
    one = compare(ours, naive_one_k, name="efficient LOO (all 30 K)",
                  baseline_name="naive LOO (one K)", repeats=reps, warmup=0)  # fmt: skip
    gs = compare(ours, grid, name="efficient LOO (all 30 K)",
                 baseline_name="GridSearchCV 5-fold K=1..30", repeats=reps, warmup=0)  # fmt: skip
    return {
        "n": len(y),
        "speedup_vs_naive_one_k": 1 / one.ratio,
        "speedup_vs_naive_all_k_estimated": 30 / one.ratio,
        "speedup_vs_gridsearch": 1 / gs.ratio,
        "ours_ms": one.candidate_s * 1e3,
        "naive_one_k_s": one.baseline_s,
        "gridsearch_s": gs.baseline_s,
    }


def _time(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def closed_form_vs_adam(quick: bool) -> dict:
    import torch
    from contrastive_sr.contrastive import contrastive_objective, solve_metric

    rng = np.random.default_rng(0)
    Phi, r = rng.normal(size=(100, 10)), rng.normal(size=100)
    reg = 0.1
    i, j = np.triu_indices(100, 1)
    d = torch.tensor(Phi[i] - Phi[j])
    D = torch.tensor(np.abs(r[i] - r[j]))

    def adam():
        M = torch.zeros(10, 10, dtype=torch.float64, requires_grad=True)
        opt = torch.optim.Adam([M], lr=0.01)  # one learning rate, not tuned
        for _ in range(500):
            opt.zero_grad()
            S = (M + M.T) / 2
            fit = torch.einsum("pa,ab,pb->p", d, S, d) - D
            loss = 2 * (fit @ fit) + reg * (S * S).sum()
            loss.backward()
            opt.step()
        return ((M + M.T) / 2).detach().numpy()

    ours = solve_metric(Phi, r, reg)
    f_ours = contrastive_objective(ours, Phi, r, reg)
    f_adam = contrastive_objective(adam(), Phi, r, reg)
    c = compare(lambda: solve_metric(Phi, r, reg), adam, name="closed form",
                baseline_name="torch Adam 500 steps", repeats=3 if quick else 7, warmup=1)  # fmt: skip
    return {"speedup": 1 / c.ratio, "closed_form_ms": c.candidate_s * 1e3,
            "adam_s": c.baseline_s, "objective_closed_form": f_ours, "objective_adam": f_adam}  # fmt: skip


def moments_vs_explicit_b(quick: bool) -> dict:
    """Our normal equations from moments against upstream's explicit B (m² × k²) and lstsq."""
    from contrastive_sr.contrastive import solve_metric

    rng = np.random.default_rng(0)
    Phi, r = rng.normal(size=(100, 10)), rng.normal(size=100)

    def explicit():
        d = (Phi[:, None, :] - Phi[None, :, :]).reshape(-1, 10)
        B = (d[:, :, None] * d[:, None, :]).reshape(len(d), 100)
        D = np.abs(r[:, None] - r[None, :]).ravel()
        return np.linalg.lstsq(B.T @ B + 0.1 * np.eye(100), B.T @ D, rcond=None)[0]

    gap = float(np.abs(explicit().reshape(10, 10) - solve_metric(Phi, r, 0.1)).max())
    c = compare(lambda: solve_metric(Phi, r, 0.1), explicit, name="moments",
                baseline_name="explicit B", repeats=5 if quick else 15)  # fmt: skip
    return {"speedup": 1 / c.ratio, "moments_ms": c.candidate_s * 1e3,
            "explicit_ms": c.baseline_s * 1e3, "max_abs_difference": gap}  # fmt: skip


def fit_vs_gplearn(quick: bool) -> dict:
    from contrastive_sr import ContrastiveSymbolicRegressor
    from gplearn.genetic import SymbolicRegressor
    from sklearn.datasets import make_friedman1
    from sklearn.model_selection import train_test_split

    X, y = make_friedman1(500, noise=1.0, random_state=0)
    Xtr, Xte, ytr, yte = train_test_split(X, y, random_state=0)
    pop, gen = (50, 9) if quick else (100, 19)
    # equal evaluations: ours evaluates n_pop * (n_gen + 1), gplearn population * generations
    ours = ContrastiveSymbolicRegressor(n_pop=pop, n_gen=gen, ensemble_size=min(30, pop),
                                        random_state=0)  # fmt: skip
    peer = SymbolicRegressor(population_size=pop, generations=gen + 1, random_state=0)
    t0 = _time(lambda: ours.fit(Xtr, ytr))
    t1 = _time(lambda: peer.fit(Xtr, ytr))
    return {"evaluations": pop * (gen + 1), "ours_s": t0, "gplearn_s": t1,
            "time_ratio": t0 / t1, "ours_r2": ours.score(Xte, yte),
            "gplearn_r2": peer.score(Xte, yte)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    out = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    with threadpool_limits(1):  # every side on one BLAS thread
        out["loo_k"] = loo_k(args.quick)
        print(json.dumps(out["loo_k"], indent=1), flush=True)
        out["closed_form_vs_adam"] = closed_form_vs_adam(args.quick)
        print(json.dumps(out["closed_form_vs_adam"], indent=1), flush=True)
        out["moments_vs_explicit_b"] = moments_vs_explicit_b(args.quick)
        print(json.dumps(out["moments_vs_explicit_b"], indent=1), flush=True)
        out["fit_vs_gplearn"] = fit_vs_gplearn(args.quick)
        print(json.dumps(out["fit_vs_gplearn"], indent=1), flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
