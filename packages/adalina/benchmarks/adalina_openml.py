"""The paper's OpenML experiments, where ``sklearn.datasets.fetch_openml`` can reach OpenML.

    python packages/adalina/benchmarks/adalina_openml.py --cache ~/openml [--ids 44 1475] [--seeds 10]

For each data set (id and tree depth from the official ``main.py``): an 80/20 split (stratified for
classification, seed 2026), ``GradientBoosting{Classifier,Regressor}(n_estimators=10,
max_depth=depth)``, one random test point explained through the path-dependent tree game (for a
classifier, a random class's raw score), budget ``factor * n`` queries, 10 estimator seeds, relative
L2 error. Ground truth: exact enumeration when n <= 20; otherwise the Shapley value from
``shap.TreeExplainer(feature_perturbation="tree_path_dependent")`` (other semi-values need the
paper's exact tree algorithm, which this package does not ship). Not run in this repository's CI
(no network); it prints one JSON line per (data set, semi-value, estimator).
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from adalina import (
    AME,
    MSR,
    Adalina,
    KernelSHAPUnbiased,
    LinearApprox,
    MSRProb,
    SemiValue,
    ShapIQ,
    TreeGame,
    exact_semivalue,
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


def build_game(data_id: int, cache: str, seed: int = 2026) -> tuple[TreeGame, object, np.ndarray]:
    from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor
    from sklearn.model_selection import train_test_split

    depth, _, classify = DATASETS[data_id]
    X, y = load(data_id, cache)
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
    return TreeGame(model, x, output=output), model, x


def ground_truth(game: TreeGame, model: object, x: np.ndarray, sv: SemiValue) -> np.ndarray | None:
    n = game.n_players
    if n <= 20:
        return exact_semivalue(game, n, sv)
    if sv.kind != "shapley":
        return None
    import shap

    explainer = shap.TreeExplainer(model, feature_perturbation="tree_path_dependent")
    values = np.asarray(explainer.shap_values(x[None]))
    if values.ndim == 3:  # (classes, 1, n) or (1, n, classes) depending on the shap version
        values = values[game.output] if values.shape[0] != 1 else values[0, :, game.output]
    return values.reshape(-1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", required=True, help="OpenML download folder")
    parser.add_argument("--ids", type=int, nargs="*", default=list(DATASETS))
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args(argv)
    estimators = {
        "adalina": lambda n, sv, s: Adalina(n, sv, random_state=s),
        "adalina-all": lambda n, sv, s: Adalina(n, sv, include_extremes=True, random_state=s),
        "gamma=U(∅)": lambda n, sv, s: LinearApprox(n, sv, gamma="empty", random_state=s),
        "gamma=mid": lambda n, sv, s: LinearApprox(n, sv, gamma="midpoint", random_state=s),
        "shap-iq": lambda n, sv, s: ShapIQ(n, sv, random_state=s),
        "msr-prob": lambda n, sv, s: MSRProb(n, sv, random_state=s),
        "ame": lambda n, sv, s: AME(n, sv, random_state=s),
        "msr": lambda n, sv, s: MSR(n, sv, random_state=s),
        "kernelshap": lambda n, sv, s: KernelSHAPUnbiased(n, sv, random_state=s),
    }
    for data_id in args.ids:
        game, model, x = build_game(data_id, args.cache)
        n, factor = game.n_players, DATASETS[data_id][1]
        for sv in paper_semivalues():
            truth = ground_truth(game, model, x, sv)
            if truth is None:
                continue
            for name, make in estimators.items():
                if (name == "msr" and sv.kind != "banzhaf") or (
                    name == "kernelshap" and sv.kind != "shapley"
                ):
                    continue
                errors = [
                    float(
                        np.linalg.norm(make(n, sv, s).approximate(factor * n, game).values - truth)
                        / np.linalg.norm(truth)
                    )
                    for s in range(args.seeds)
                ]
                row = {
                    "id": data_id,
                    "n": n,
                    "semivalue": sv.name,
                    "estimator": name,
                    "budget": factor * n,
                    "mean": np.mean(errors),
                    "std": np.std(errors),
                }
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
