import pytest
import torch
from torch import nn


@pytest.fixture(autouse=True)
def _one_thread():
    # Tiny models run faster on one thread than on two busy cores.
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


class TinyNet(nn.Module):
    """A conv backbone with ReLU'd pooled features and a linear head ``fc`` (D = 200)."""

    def __init__(self, d: int = 200, classes: int = 5, bias: bool = True) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(2, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.Conv2d(8, d, 3, padding=1),
            nn.ReLU(),
        )
        self.fc = nn.Linear(d, classes, bias=bias)

    def features(self, x):
        return self.body(x).mean(dim=(2, 3))

    def forward(self, x):
        return self.fc(self.features(x))


@pytest.fixture
def make_net():
    return TinyNet


@pytest.fixture
def tiny_net():
    torch.manual_seed(0)
    return TinyNet().eval()


@pytest.fixture
def images():
    g = torch.Generator().manual_seed(1)
    return torch.randn(32, 2, 6, 6, generator=g)
