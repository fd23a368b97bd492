"""split_model on modules named like torchvision's and timm's; the real classes where they import."""

from typing import ClassVar

import pytest
import torch
from adascale import SCALE, AdaSCALE, Energy, head_name, split_model
from torch import nn


class ResNet(nn.Module):  # the names torchvision's ResNet uses: avgpool, then fc
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc(torch.flatten(self.avgpool(torch.relu(self.conv(x))), 1))


class VisionTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(12, 200)
        self.heads = nn.Sequential()
        self.heads.add_module("head", nn.Linear(200, 4))

    def forward(self, x):
        return self.heads(torch.relu(self.encoder(x.flatten(2).mean(2).repeat(1, 4))))


class SwinTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Linear(3, 100)
        self.head = nn.Linear(100, 4)

    def forward(self, x):
        return self.head(torch.relu(self.features(x.mean((2, 3)))))


class TimmLike(nn.Module):
    pretrained_cfg: ClassVar[dict] = {"classifier": "head.fc"}

    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(3, 100)
        self.head = nn.Sequential()
        self.head.add_module("fc", nn.Linear(100, 4))

    def forward(self, x):
        return self.head(torch.relu(self.stem(x.mean((2, 3)))))


@pytest.mark.parametrize(
    ("cls", "name"),
    [
        (ResNet, "fc"),
        (VisionTransformer, "heads.head"),
        (SwinTransformer, "head"),
        (TimmLike, "head.fc"),
    ],
)
def test_split_finds_the_head_and_the_penultimate_features(cls, name):
    torch.manual_seed(0)
    model = cls().eval()
    assert head_name(model) == name
    backbone, head = split_model(model)
    assert head is model.get_submodule(name)
    x = torch.randn(3, 3, 4, 4)
    z = backbone(x)
    torch.testing.assert_close(head(z), model(x))  # features are exactly the head's input


def test_split_model_drives_adascale_end_to_end():
    torch.manual_seed(0)
    model = ResNet().eval()
    x = torch.randn(40, 3, 5, 5)
    det = AdaSCALE(*split_model(model), k1=0.1, k2=0.2, n_fit=None).fit(x)
    assert det.score(x[:5]).shape == (5,)
    torch.testing.assert_close(Energy(*split_model(model)).score(x), torch.logsumexp(model(x), 1))


def test_feature_layer_hook_and_errors():
    model = ResNet().eval()
    backbone, head = split_model(model, feature_layer="avgpool")
    x = torch.randn(2, 3, 4, 4)
    torch.testing.assert_close(head(backbone(x)), model(x))
    with pytest.raises(ValueError, match="no submodule 'nope'"):
        split_model(model, head="nope")
    with pytest.raises(TypeError, match="not the final"):
        split_model(model, head="conv")
    with pytest.raises(ValueError, match="cannot tell"):
        split_model(nn.Sequential(nn.Linear(2, 2)))


def test_a_model_put_in_eval_before_the_split_does_not_warn():
    import warnings

    model = ResNet().eval()
    det = SCALE(*split_model(model), percentile=50)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        det.score(torch.randn(2, 3, 4, 4))


def test_real_torchvision_resnet_where_it_imports():
    models = pytest.importorskip("torchvision.models")
    model = models.resnet18(num_classes=10).eval()
    backbone, head = split_model(model)
    assert head is model.fc
    x = torch.randn(2, 3, 32, 32)
    torch.testing.assert_close(head(backbone(x)), model(x))
