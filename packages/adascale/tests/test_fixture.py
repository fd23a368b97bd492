"""The shipped classifiers have learned their task; the training script runs and caches."""

import dataclasses

import pytest
import torch
from adascale import shapes, split_model
from adascale.fixture import CHECKPOINTS, Recipe, TinyResNet, checkpoint_path, load_fixture


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_shipped_checkpoints_are_accurate(seed):
    model = load_fixture(Recipe(seed=seed), train=False)
    x, y = shapes.shapes(shapes.ID_CLASSES, 25, seed=424242)
    with torch.no_grad():
        acc = (model(torch.from_numpy(shapes.normalise(x))).argmax(1).numpy() == y).mean()
    assert acc >= 0.95


def test_training_caches_and_reloads(tmp_path):
    recipe = dataclasses.replace(
        Recipe(seed=9), widths=(4, 4, 8, 16), n_per_class=16, epochs=1, batch_size=32
    )
    model = load_fixture(recipe, root=tmp_path)
    assert checkpoint_path(recipe, tmp_path).exists()
    again = load_fixture(recipe, root=tmp_path, train=False)
    for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert checkpoint_path(recipe) != checkpoint_path(dataclasses.replace(recipe, epochs=2))
    with pytest.raises(FileNotFoundError, match=r"python -m adascale\.fixture"):
        load_fixture(dataclasses.replace(recipe, seed=10), root=tmp_path, train=False)


def test_tinyresnet_splits_like_torchvision():
    model = TinyResNet().eval()
    backbone, head = split_model(model)
    x = torch.randn(2, 1, 32, 32)
    torch.testing.assert_close(head(backbone(x)), model(x))
    assert CHECKPOINTS.is_dir()


def test_data_shapes_and_ranges():
    x, y = shapes.shapes(shapes.NEAR_CLASSES, 3, seed=0)
    assert x.shape == (6, 1, 32, 32) and set(y.tolist()) == {0, 1}
    far = shapes.far_ood(8, seed=0)
    assert far.shape == (8, 1, 32, 32) and far.min() >= 0 and far.max() <= 1
