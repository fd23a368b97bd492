"""How often PPAI's default interval differs from ppi_py's, and that ``fallback=False`` never does.

    python packages/ppai/benchmarks/fallback_vs_ppi_py.py

One arm, π ≡ 1 (PPAI reduces to PPI++), useless predictions (where λ̂ often clips to 0 and the
guarantee's fallback fires), 200 data sets drawn as ``tests/test_reduction.py`` draws them (n = 200,
N = 400, seed 7). Counts OLS and mean intervals equal to ``ppi_py``'s to 1e-10, with the default
``fallback=True`` and with ``fallback=False``.
"""

import warnings

import numpy as np
import ppai
import ppi_py
from threadpoolctl import threadpool_limits

warnings.filterwarnings("ignore", category=FutureWarning)  # sklearn's, inside ppi_py
rng = np.random.default_rng(7)
n, N, sets = 200, 400, 200
exact_ok = fired = guarded_ok = mean_fired = mean_exact_ok = 0
with threadpool_limits(1):
    for _ in range(sets):
        f, f_u = rng.standard_normal(n), rng.standard_normal(N)
        X = np.c_[np.ones(n), rng.standard_normal((n, 2))]
        X_u = np.c_[np.ones(N), rng.standard_normal((N, 2))]
        Y = X @ [1.0, 0.5, -0.5] + rng.standard_normal(n)
        A, pi = np.zeros(n, int), np.ones(n)
        ref = np.c_[ppi_py.ppi_ols_ci(X, Y, f, X_u, f_u, alpha=0.05)]
        ex = ppai.PPAI("ols", target_arm=0, fallback=False).fit(X, A, Y, pi, f, X_u, f_u)
        exact_ok += np.allclose(ex.conf_int(), ref, rtol=1e-10, atol=1e-12)
        g = ppai.PPAI("ols", target_arm=0).fit(X, A, Y, pi, f, X_u, f_u)
        same = np.allclose(g.conf_int(), ref, rtol=1e-10, atol=1e-12)
        guarded_ok += same
        fired += not same
        ones, ones_u = np.ones((n, 1)), np.ones((N, 1))
        mref = np.r_[ppi_py.ppi_ols_ci(ones, Y, f, ones_u, f_u, alpha=0.05)].ravel()
        mex = np.r_[ppai.ppai_mean_ci(Y, A, pi, f, f_u, arm=0, alpha=0.05, fallback=False)].ravel()
        mg = np.r_[ppai.ppai_mean_ci(Y, A, pi, f, f_u, arm=0, alpha=0.05)].ravel()
        mean_exact_ok += np.allclose(mex, mref, rtol=1e-10)
        mean_fired += not np.allclose(mg, mref, rtol=1e-10)
print(
    f"OLS, {sets} sets: fallback=False equals ppi_py on {exact_ok}; default equals on {guarded_ok}, differs (fallback fired) on {fired}"
)
print(
    f"mean, {sets} sets: fallback=False equals ppi_py on {mean_exact_ok}; default differs on {mean_fired}"
)
