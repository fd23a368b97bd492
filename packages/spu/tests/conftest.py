import pytest

try:
    import torch
except ModuleNotFoundError:  # a numpy-only package: nothing to pin
    torch = None


@pytest.fixture(autouse=True)
def _one_thread():
    # Tiny models run faster on one thread than on two busy cores.
    if torch is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
