import numpy as np
import pytest
from sklearn.linear_model import Lasso
from ssn_lateral import LCA, ICACoder, SparseCoder, data
from ssn_lateral.baselines import lca_codes


def test_lca_fixed_point_is_the_lasso_solution():
    rng = np.random.default_rng(0)
    D = rng.standard_normal((10, 6))
    D /= np.linalg.norm(D, axis=1, keepdims=True)
    x = rng.standard_normal((1, 6))
    a = lca_codes(x, D, 0.1, n_steps=4000, dt_over_tau=0.05)
    # sklearn's Lasso minimises 1/(2n)|x - D^T a|^2 + alpha |a|_1 with n = 6 rows
    ref = Lasso(alpha=0.1 / 6, fit_intercept=False, tol=1e-12, max_iter=100000).fit(D.T, x[0]).coef_
    np.testing.assert_allclose(a[0], ref, atol=1e-5)


def test_linear_baselines_scale_with_contrast():
    X = data.natural_patches(300, 6, images="textures", random_state=0)
    ica = ICACoder(8, max_iter=50, random_state=0).fit(X)
    # the peer's own transform of the degraded patch
    np.testing.assert_allclose(
        ica.transform(X[:5], contrast=0.5), ica.model_.transform(0.5 * X[:5]), atol=1e-12
    )
    sc = SparseCoder(8, max_iter=1, random_state=0).fit(X)
    lca = LCA(8, max_iter=1, random_state=0).fit(X)
    assert sc.transform(X[:5]).shape == lca.transform(X[:5]).shape == (5, 8)
    # lasso codes shrink: at low contrast most atoms are silent
    assert (sc.transform(X[:50], contrast=0.05) == 0).mean() > (sc.transform(X[:50]) == 0).mean()
    with pytest.raises(ValueError, match="contrast"):
        ica.transform(X[:5], contrast=-1.0)


def test_fastica_defaults_to_the_data_rank_and_survives_noise():
    from ssn_lateral import metrics

    X = data.natural_patches(700, 6, images="textures", random_state=0)
    X, Xt = X[:500], X[500:]
    ica = ICACoder(max_iter=100, random_state=0).fit(X)
    assert ica.n_components_ == 35  # 36 pixels, the DC direction emptied by mean removal
    clean = ica.transform(X)
    # a component on the empty DC direction would turn sigma = 0.1 into R^2 << 0
    noisy = ica.transform(Xt, noise=0.1, random_state=0)
    assert metrics.reconstruction_r2(clean, X, noisy, Xt) > 0.9
    with pytest.raises(ValueError, match="rank of X = 35"):
        ICACoder(36).fit(X)
