import pytest
import torch
from dllm_cache import TinyLLaDA, TinyLLaDAConfig

VOCAB = 48  # ids 0-3: pad, bos, eos, mask


@pytest.fixture(autouse=True)
def _one_thread():
    # Tiny models run faster on one thread than on two busy cores.
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def _make_model(seed: int = 0, **overrides) -> TinyLLaDA:
    """A random TinyLLaDA with peaked logits (init_std 0.1), so argmax and top-k have no near-ties."""
    fields = dict(
        vocab_size=VOCAB, d_model=32, n_heads=4, n_layers=3, mlp_hidden_size=64, init_std=0.1
    )
    fields.update(overrides)
    torch.manual_seed(seed)
    return TinyLLaDA(TinyLLaDAConfig(**fields)).eval()


def _prompts(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, VOCAB, (batch, length), generator=g)


@pytest.fixture
def make_model():
    return _make_model


@pytest.fixture
def prompts():
    """``prompts(batch, length, seed=0)``: random prompt ids without special tokens."""
    return _prompts


@pytest.fixture
def model() -> TinyLLaDA:
    return _make_model()
