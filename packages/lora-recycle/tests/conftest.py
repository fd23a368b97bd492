import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # lora_testmodels, under importlib mode

from lora_testmodels import ADAPTERS, VOCAB, make_llama, train_peft_adapter


@pytest.fixture(autouse=True)
def _one_thread():
    # Tiny models run faster on one thread than on two busy cores.
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def adapter_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("adapters")
    return [
        str(train_peft_adapter(root / f"lora{i}", r, a, rs, seed=10 + i))
        for i, (r, a, rs) in enumerate(ADAPTERS)
    ]


@pytest.fixture
def llama():
    return make_llama()


@pytest.fixture
def llama_pool(adapter_dirs):
    from lora_recycle import LoraPool

    return LoraPool.from_pretrained(adapter_dirs, make_llama())


@pytest.fixture
def ids():
    return torch.randint(0, VOCAB, (2, 7), generator=torch.Generator().manual_seed(3))
