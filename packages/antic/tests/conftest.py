import sys
from pathlib import Path

import pytest
import torch

# Test files import the shared tiny runs by module name (pytest runs in importlib mode).
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True)
def _one_thread():
    # Tiny models run faster on one thread than on two busy cores.
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
