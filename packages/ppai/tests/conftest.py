import numpy as np
import pytest
from ppai.sim import EpsilonGreedy, LinearContextualBandit, NoisyOracle, Uniform, simulate
from threadpoolctl import threadpool_limits


@pytest.fixture(autouse=True)
def _one_thread():
    # Small arrays run faster on one thread than on two busy cores (BLAS threads spin-wait). ppai is
    # numpy/scipy only, so torch is not imported (that alone took seconds of the suite).
    with threadpool_limits(1):
        yield


def bandit_data(
    seed: int = 0, T: int = 400, N: int = 2000, signal: float = 1.0, adaptive: bool = True
) -> dict:
    """One experiment (2 arms, ε-greedy, or uniform when not adaptive), predictions for both arms."""
    env = LinearContextualBandit.default()
    pred = NoisyOracle(env, signal=signal, noise_sd=0.3, bias=0.2)
    ex = simulate(
        env,
        EpsilonGreedy(0.2, batch=25, warmup=25) if adaptive else Uniform(),
        pred,
        T=T,
        N=N,
        reps=1,
        rng=np.random.default_rng(seed),
    )
    return ex.rep(0)


def iid_data(seed: int = 0, n: int = 300, N: int = 1500, p: int = 3) -> dict:
    """Non-adaptive data (one arm, π ≡ 1): the setting where PPAI reduces to PPI++."""
    rng = np.random.default_rng(seed)
    beta = np.linspace(1.0, -1.0, p)

    def draw(m):
        X = np.c_[np.ones(m), rng.standard_normal((m, p - 1))]
        Y = X @ beta + rng.standard_normal(m)
        f = X @ beta + 0.3 + 0.6 * rng.standard_normal(m)
        return X, Y, f

    X, Y, f = draw(n)
    X_u, _, f_u = draw(N)
    return {"X": X, "Y": Y, "f": f, "X_u": X_u, "f_u": f_u, "A": np.zeros(n, int), "pi": np.ones(n)}


@pytest.fixture
def make_iid():
    return iid_data


@pytest.fixture
def make_bandit():
    return bandit_data
