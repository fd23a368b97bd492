import pytest
from duetserve import HardwareProfile, ModelShape, RooflineModel

try:
    import torch
except ModuleNotFoundError:  # the core is numpy-only: nothing to pin
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


@pytest.fixture(scope="session")
def h100():
    return HardwareProfile.h100_sxm_spec()


@pytest.fixture(scope="session")
def qwen8b(h100):
    return RooflineModel(ModelShape.qwen3_8b(), h100)


@pytest.fixture(scope="session")
def tiny_model():
    """A small shape on a small GPU: hand computations stay readable."""
    shape = ModelShape(
        n_layers=2, d_model=64, n_heads=4, n_kv_heads=2, d_head=16, d_ff=128, vocab=100, name="tiny"
    )
    hw = HardwareProfile.assumed(
        "toy",
        n_sm=16,
        sms_per_tpc=2,
        peak_flops=1e12,
        peak_bw=1e10,
        bw_saturation=0.5,
        compute_efficiency=1.0,
        bandwidth_efficiency=1.0,
    )
    return RooflineModel(shape, hw)
