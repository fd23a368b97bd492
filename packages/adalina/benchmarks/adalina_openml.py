"""The paper's OpenML experiments, where ``sklearn.datasets.fetch_openml`` can reach OpenML.

    python packages/adalina/benchmarks/adalina_openml.py --cache ~/openml [--ids 44 1475] [--seeds 10]
    python packages/adalina/benchmarks/adalina_openml.py --sklearn breast_cancer digits [--factor 50]

``--sklearn`` runs the same protocol offline on scikit-learn's bundled data sets (tree depth 15).

For each data set (id and tree depth from the official ``main.py``): an 80/20 split (stratified for
classification, seed 2026), ``GradientBoosting{Classifier,Regressor}(n_estimators=10,
max_depth=depth)``, one random test point explained through the path-dependent tree game (for a
classifier, a random class's raw score), budget ``factor * n`` queries, 10 estimator seeds, relative
L2 error. Ground truth for every semi-value and every n: :func:`adalina.exact_tree_semivalue`
(exact, checked against enumeration and against shap's TreeExplainer for the Shapley value), so
no semi-value is skipped above n = 20. It prints one JSON line per (data set, semi-value,
estimator); the OpenML part needs network access and was not run in this repository.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from adalina import (
    AME,
    ARM,
    GELS,
    MSR,
    OFA,
    Adalina,
    GELSShapley,
    KernelSHAPMV,
    KernelSHAPUnbiased,
    LinearApprox,
    MSRProb,
    ShapIQ,
    TreeGame,
    exact_tree_semivalue,
    paper_semivalues,
)

# OpenML id -> (tree depth, budget factor, classification), from the official main.py / args.py
DATASETS = {
    41168: (40, 1000, True),
    41150: (20, 1000, True),
    41145: (15, 1000, True),
    44: (15, 1000, True),
    1475: (20, 1000, True),
    4538: (10, 1000, True),
    43174: (10, 1000, False),
    44975: (30, 1000, False),
    4549: (20, 1000, False),
    40996: (30, 100, True),
    40926: (20, 20, True),
    1478: (20, 100, True),
}


def load(data_id: int, cache: str) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import fetch_openml
    from sklearn.preprocessing import OrdinalEncoder

    frame = fetch_openml(data_id=data_id, data_home=cache, as_frame=True)
    X = frame.data.copy()
    categorical = X.select_dtypes(exclude="number").columns
    if len(categorical):
        X[categorical] = OrdinalEncoder().fit_transform(X[categorical].astype(str))
    return X.to_numpy(dtype=float), frame.target.to_numpy()


def _fit_and_pick(
    X: np.ndarray, y: np.ndarray, depth: int, classify: bool, seed: int = 2026
) -> TreeGame:
    from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor
    from sklearn.model_selection import train_test_split

    if not classify:
        y = y.astype(float)
    X_tr, X_te, y_tr, _ = train_test_split(
        X, y, test_size=0.2, random_state=seed, stratify=y if classify else None
    )
    cls = GradientBoostingClassifier if classify else GradientBoostingRegressor
    model = cls(n_estimators=10, max_depth=depth, random_state=seed).fit(X_tr, y_tr)
    rng = np.random.default_rng(seed)
    x = X_te[rng.integers(len(X_te))]
    output = None
    if classify and len(model.classes_) > 2:
        output = int(rng.integers(len(model.classes_)))
    return TreeGame(model, x, output=output)


def build_game(data_id: int, cache: str, seed: int = 2026) -> TreeGame:
    depth, _, classify = DATASETS[data_id]
    X, y = load(data_id, cache)
    return _fit_and_pick(X, y, depth, classify, seed)


def build_sklearn_game(name: str, seed: int = 2026) -> TreeGame:
    from sklearn import datasets

    loader, classify = SKLEARN[name]
    X, y = getattr(datasets, loader)(return_X_y=True)
    return _fit_and_pick(np.asarray(X, dtype=float), y, 15, classify, seed)


# scikit-learn's bundled data sets: loader, classification
SKLEARN = {
    "breast_cancer": ("load_breast_cancer", True),
    "digits": ("load_digits", True),
    "wine": ("load_wine", True),
    "diabetes": ("load_diabetes", False),
}

ESTIMATORS = {
    "adalina": lambda n, sv, s: Adalina(n, sv, random_state=s),
    "adalina-all": lambda n, sv, s: Adalina(n, sv, include_extremes=True, random_state=s),
    "gamma=0": lambda n, sv, s: LinearApprox(n, sv, gamma="zero", random_state=s),
    "gamma=U(∅)": lambda n, sv, s: LinearApprox(n, sv, gamma="empty", random_state=s),
    "gamma=mid": lambda n, sv, s: LinearApprox(n, sv, gamma="midpoint", random_state=s),
    "shap-iq": lambda n, sv, s: ShapIQ(n, sv, random_state=s),
    "msr-prob": lambda n, sv, s: MSRProb(n, sv, random_state=s),
    "ame": lambda n, sv, s: AME(n, sv, random_state=s),
    "arm": lambda n, sv, s: ARM(n, sv, random_state=s),
    "gels": lambda n, sv, s: GELS(n, sv, random_state=s),
    "gels-shapley": lambda n, sv, s: GELSShapley(n, sv, random_state=s),
    "ofa": lambda n, sv, s: OFA(n, sv, random_state=s),
    "msr": lambda n, sv, s: MSR(n, sv, random_state=s),
    "kernelshap": lambda n, sv, s: KernelSHAPUnbiased(n, sv, random_state=s),
    "kernelshap-geomean": lambda n, sv, s: KernelSHAPMV(n, sv, random_state=s),
}
SHAPLEY_ONLY = ("kernelshap", "kernelshap-geomean", "gels-shapley")


def run_game(
    label: object, game: TreeGame, factor: int, seeds: int, estimators: list[str]
) -> list[dict[str, object]]:
    """Every semi-value of the paper, every estimator that applies; one row each."""
    n, rows = game.n_players, []
    for sv in paper_semivalues():
        truth = exact_tree_semivalue(game, sv)
        for name in estimators:
            if (name == "msr" and sv.kind != "banzhaf") or (
                name in SHAPLEY_ONLY and sv.kind != "shapley"
            ):
                continue
            make = ESTIMATORS[name]
            errors = [
                float(
                    np.linalg.norm(make(n, sv, s).approximate(factor * n, game).values - truth)
                    / np.linalg.norm(truth)
                )
                for s in range(seeds)
            ]
            row = {
                "data": label,
                "n": n,
                "semivalue": sv.name,
                "estimator": name,
                "budget": factor * n,
                "mean": float(np.mean(errors)),
                "se": float(np.std(errors, ddof=1) / np.sqrt(seeds)) if seeds > 1 else None,
            }
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", help="OpenML download folder")
    parser.add_argument("--ids", type=int, nargs="*", default=list(DATASETS))
    parser.add_argument("--sklearn", nargs="*", choices=list(SKLEARN), help="offline data sets")
    parser.add_argument("--factor", type=int, help="budget factor (default: the paper's per id)")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--estimators", nargs="*", choices=list(ESTIMATORS), default=None)
    args = parser.parse_args(argv)
    estimators = args.estimators or list(ESTIMATORS)
    rows: list[dict[str, object]] = []
    if args.sklearn is not None:
        for name in args.sklearn or list(SKLEARN):
            game = build_sklearn_game(name)
            rows += run_game(name, game, args.factor or 100, args.seeds, estimators)
        return rows
    if args.cache is None:
        parser.error("--cache is needed for OpenML (or pass --sklearn for the offline sets)")
    for data_id in args.ids:
        game = build_game(data_id, args.cache)
        factor = args.factor or DATASETS[data_id][1]
        rows += run_game(data_id, game, factor, args.seeds, estimators)
    return rows


if __name__ == "__main__":
    main()
