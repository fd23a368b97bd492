"""CPU benchmark, one run, ratios by ``shared_core.bench.compare`` (interleaved, median of pairs).

    python benchmarks/bench_cpu.py [--repeats 15]

1. ``AdaSCALE.score`` / ``SCALE.score`` on the reproduction's TinyResNet, batch 64 (the issue
   expects 3-4x: one extra backward and one extra forward).
2. ``SCALE.predict_features`` / pytorch-ood's ``SCALE.predict_feature_maps`` on ResNet-50-sized
   features (batch 64, D = 2048, the same head), target <= 1.2x; and AdaSCALE's feature path
   (``predict_features(z, z~)``) against the same peer. pytorch-ood's top-level import needs
   torchvision; its detectors do not, so they are loaded without the package ``__init__``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
import types

import torch
from adascale import SCALE, AdaSCALE, shapes
from adascale.fixture import Recipe, load_fixture

from shared_core.bench import compare


def pytorch_ood_detector() -> types.ModuleType | None:
    spec = importlib.util.find_spec("pytorch_ood")
    if spec is None:
        return None
    try:
        import pytorch_ood  # noqa: F401
    except ImportError:  # torchvision missing: load the detectors without the package __init__
        for name in [m for m in sys.modules if m.startswith("pytorch_ood")]:
            del sys.modules[name]
        shell = types.ModuleType("pytorch_ood")
        shell.__path__ = list(spec.submodule_search_locations or [])
        sys.modules["pytorch_ood"] = shell
    return importlib.import_module("pytorch_ood.detector")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    model = load_fixture(Recipe(seed=0), train=False)
    x = torch.from_numpy(shapes.normalise(shapes.shapes(shapes.ID_CLASSES, 8, 1)[0]))  # 64
    fit = torch.from_numpy(shapes.normalise(shapes.shapes(shapes.ID_CLASSES, 25, 2)[0]))
    ada = AdaSCALE(model.features, model.fc, n_fit=None).fit(fit)
    scale = SCALE(model.features, model.fc, percentile=85)
    c = compare(
        lambda: ada.score(x),
        lambda: scale.score(x),
        name="AdaSCALE.score",
        baseline_name="SCALE.score",
        repeats=args.repeats,
    )
    print(c)
    rows.append(c.as_row())

    g = torch.Generator().manual_seed(0)
    z = torch.randn(64, 2048, generator=g).relu()
    zt = z + 0.01 * torch.randn(64, 2048, generator=g)
    head = torch.nn.Linear(2048, 1000).eval()
    ours = SCALE(lambda t: t, head, percentile=85)
    ada_f = AdaSCALE(lambda t: t, head, n_fit=None)
    ada_f.fit_features(
        torch.randn(2000, 2048, generator=g).relu(), torch.randn(2000, 2048, generator=g).relu()
    )
    peer = pytorch_ood_detector()
    if peer is None:
        print("pytorch-ood not installed: feature-path ratios not measured")
    else:
        theirs = peer.SCALE(None, lambda t: head(t.flatten(1)), percentile=0.85)
        fm = z[:, :, None, None]
        torch.testing.assert_close(ours.predict_features(z), theirs.predict_feature_maps(fm))
        for name, fn in (
            ("SCALE.predict_features", lambda: ours.predict_features(z)),
            ("AdaSCALE.predict_features", lambda: ada_f.predict_features(z, zt)),
        ):
            with torch.no_grad():
                c = compare(
                    fn,
                    lambda: theirs.predict_feature_maps(fm),
                    name=name,
                    baseline_name="pytorch_ood SCALE.predict_feature_maps",
                    repeats=args.repeats,
                )
            print(c)
            rows.append(c.as_row())
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
