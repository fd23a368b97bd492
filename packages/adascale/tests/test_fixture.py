"""The reproduction's classifier: its shape, its training cache, the procedural data."""

import dataclasses
from pathlib import Path

import adascale
import pytest
import torch
from adascale import shapes, split_model
from adascale.fixture import (
    Recipe,
    TinyResNet,
    checkpoint_path,
    decode_state,
    encode_state,
    load_fixture,
    train_fixture,
)

TINY = Recipe(seed=9, widths=(4, 4, 8), feature_dim=32, n_per_class=8, epochs=1, batch_size=32)


def test_default_architecture_pools_a_4x4_map_into_512_features():
    model = Recipe().build().eval()
    x = torch.randn(2, 1, 32, 32)
    assert model.feature_map(x).shape == (2, 512, 4, 4)
    assert dataclasses.replace(Recipe(), depth=2).build().feature_map(x).shape[-2:] == (4, 4)
    backbone, head = split_model(model)
    torch.testing.assert_close(head(backbone(x)), model(x))
    assert bool((model.features(x) >= 0).all())  # ReLU'd features, as SCALE expects


def test_training_caches_and_reloads(tmp_path):
    model = load_fixture(TINY, root=tmp_path)
    assert checkpoint_path(TINY, tmp_path).exists()
    again = load_fixture(TINY, root=tmp_path, train=False)
    for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert checkpoint_path(TINY) != checkpoint_path(dataclasses.replace(TINY, epochs=2))
    with pytest.raises(FileNotFoundError, match="load_fixture"):
        load_fixture(dataclasses.replace(TINY, seed=10), root=tmp_path, train=False)


def test_training_is_deterministic_and_the_text_encoding_round_trips():
    a, b = train_fixture(TINY), train_fixture(TINY)
    back = decode_state(TINY, encode_state(a))
    x = torch.randn(3, 1, 32, 32)
    with torch.no_grad():
        assert torch.equal(a(x), b(x)) and torch.equal(back(x), a(x))
    assert isinstance(TinyResNet(), torch.nn.Module)


def test_data_shapes_and_ranges():
    x, y = shapes.shapes(shapes.NEAR_CLASSES, 3, seed=0)
    assert x.shape == (6, 1, 32, 32) and set(y.tolist()) == {0, 1}
    far = shapes.far_ood(8, seed=0)
    assert far.shape == (8, 1, 32, 32) and far.min() >= 0 and far.max() <= 1


def test_the_package_ships_no_weights_or_data():
    root = Path(adascale.__file__).resolve().parent
    files = [p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert not [p.name for p in files if p.suffix not in {".py", ".typed"}]
    assert max(p.stat().st_size for p in files) < 50_000
