import pytest
from threadpoolctl import threadpool_limits


@pytest.fixture(autouse=True)
def _one_thread():
    # Small linear algebra runs faster on one BLAS thread than on two busy cores.
    with threadpool_limits(limits=1):
        yield
