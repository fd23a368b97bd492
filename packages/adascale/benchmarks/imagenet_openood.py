"""ImageNet-1k / ResNet-50 against the official OpenOOD v1.5 numbers (GPU box; not run here).

    ADASCALE_IMAGENET_ROOT=/data/openood python benchmarks/imagenet_openood.py

Expects OpenOOD's ImageNet layout under ``$ADASCALE_IMAGENET_ROOT`` (``images_largescale/`` and
``benchmark_imglist/imagenet/*.txt``) and torchvision's ResNet-50 IMAGENET1K_V1 weights in the torch
hub cache. Fits AdaSCALE-A on 5000 random ID validation images with ``p = [80, 85]`` and checks near
(SSB-hard, NINCO) and far (iNaturalist, Textures, OpenImage-O) mean FPR@95 within ±1.0 of the
repository's 51.54 / 12.97. Skips cleanly (exit 0, one line) when anything is missing.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

TARGET = {"near": 51.54, "far": 12.97}
SETS = {"near": ["ssb_hard", "ninco"], "far": ["inaturalist", "textures", "openimage_o"]}


def _skip(why: str) -> None:
    print(f"skipped: {why}")
    raise SystemExit(0)


def _dataset(root: Path, imglist: str):
    import torch
    from PIL import Image
    from torchvision import transforms

    tf = transforms.Compose(
        [
            transforms.Resize(256),
            transforms.CenterCrop(224),
            transforms.ToTensor(),
            transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
        ]
    )
    lines = (root / "benchmark_imglist" / "imagenet" / imglist).read_text().split("\n")
    paths = [root / "images_largescale" / ln.split()[0] for ln in lines if ln.strip()]

    class DS(torch.utils.data.Dataset):
        def __len__(self):
            return len(paths)

        def __getitem__(self, i):
            return tf(Image.open(paths[i]).convert("RGB"))

    return DS()


def _loader(dataset):
    import torch

    return torch.utils.data.DataLoader(dataset, batch_size=64, num_workers=8, shuffle=False)


def main() -> None:
    root = os.environ.get("ADASCALE_IMAGENET_ROOT")
    if not root or not Path(root).is_dir():
        _skip("set ADASCALE_IMAGENET_ROOT to OpenOOD's ImageNet data")
    try:
        import torch
        from torchvision.models import ResNet50_Weights, resnet50
    except ImportError:
        _skip("torchvision is not installed")
    if not torch.cuda.is_available():
        _skip("no CUDA device")
    from adascale import AdaSCALE, evaluate, split_model

    try:
        model = resnet50(weights=ResNet50_Weights.IMAGENET1K_V1).cuda().eval()
    except Exception as error:
        _skip(f"ResNet-50 weights unavailable ({error})")
    base = Path(root)
    fit = _loader(base, "val_imagenet.txt")
    generator = torch.Generator().manual_seed(0)
    fit.dataset_indices = torch.randperm(len(fit.dataset), generator=generator)[:5000]
    fit = torch.utils.data.DataLoader(
        torch.utils.data.Subset(fit.dataset, fit.dataset_indices.tolist()),
        batch_size=64,
        num_workers=8,
    )
    det = AdaSCALE(*split_model(model), p_min=80, p_max=85, n_fit=5000).fit(fit)
    id_loader = _loader(base, "test_imagenet.txt")
    failed = False
    for kind, names in SETS.items():
        res = evaluate(det, id_loader, {n: _loader(_dataset(base, f"test_{n}.txt")) for n in names})
        fpr = 100 * sum(r["FPR@95"] for r in res.values()) / len(res)
        ok = abs(fpr - TARGET[kind]) <= 1.0
        failed |= not ok
        print(f"{kind}: FPR@95 {fpr:.2f} (official {TARGET[kind]}) {'ok' if ok else 'MISSED'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
